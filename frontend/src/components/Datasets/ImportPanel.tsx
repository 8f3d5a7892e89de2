// The Hugging Face importer: the server streams the rows, proposes a mapping (or uses the
// one given) and checks every row exactly like an upload.
import { useMutation } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { Link } from 'react-router-dom'
import { api, unwrap, type Schemas } from '../../api/client'
import { Field } from '../ui/fields'
import { ProgressBar } from '../ui/Status'
import { KIND_LABEL } from './format'
import type { Kind } from './http'
import { MappingEditor } from './MappingEditor'
import { mappingFromRows, type MappingRow } from './mapping'
import { useImportProgress, type ImportState } from './useImportProgress'
import { ValidationSummary } from './ValidationSummary'

type ImportBody = Schemas['DatasetImportCreate']

interface Fields {
  source: string
  config: string
  split: string
  limit: string
  name: string
  kind: Kind | ''
  token: string
}

const EMPTY: Fields = { source: '', config: '', split: 'train', limit: '1000', name: '', kind: '', token: '' }

function toBody(f: Fields, rows: MappingRow[]): ImportBody {
  const mapping = mappingFromRows(rows)
  return {
    source: f.source.trim(),
    config: f.config.trim() || null,
    split: f.split.trim() || null,
    limit: f.limit ? Number(f.limit) : null,
    name: f.name.trim() || null,
    kind: f.kind || null,
    mapping: Object.keys(mapping).length ? mapping : null,
    // The token goes to the server for this one import and is never kept here.
    token: f.token || null,
  }
}

export function ImportPanel() {
  const [fields, setFields] = useState<Fields>(EMPTY)
  const [rows, setRows] = useState<MappingRow[]>([])
  const start = useMutation({
    mutationFn: async (body: ImportBody) => unwrap(await api.POST('/api/datasets/import', { body })),
    // Forget the token as soon as the request has gone.
    onSettled: () => setFields((f) => ({ ...f, token: '' })),
  })
  const progress = useImportProgress(start.data?.import_id ?? null)
  const current = progress.data ?? start.data
  const set = (patch: Partial<Fields>) => setFields((f) => ({ ...f, ...patch }))
  const submit = (e: FormEvent) => {
    e.preventDefault()
    start.mutate(toBody(fields, rows))
  }
  const running = start.isPending || current?.state === 'running'
  return (
    <div className="flex flex-col gap-5">
      <form className="card flex flex-col gap-4" onSubmit={submit}>
        <div className="grid gap-4 md:grid-cols-3">
          <Field label="dataset id or import directory" className="md:col-span-3">
            <input className="input font-mono" required placeholder="openai/gsm8k" value={fields.source} onChange={(e) => set({ source: e.target.value })} />
          </Field>
          <Field label="config (subset)">
            <input className="input font-mono" placeholder="default" value={fields.config} onChange={(e) => set({ config: e.target.value })} />
          </Field>
          <Field label="split">
            <input className="input font-mono" placeholder="train, test, all" value={fields.split} onChange={(e) => set({ split: e.target.value })} />
          </Field>
          <Field label="limit (rows)">
            <input className="input font-mono" type="number" min={1} value={fields.limit} onChange={(e) => set({ limit: e.target.value })} />
          </Field>
          <Field label="kind">
            <select className="input" value={fields.kind} onChange={(e) => set({ kind: e.target.value as Kind | '' })}>
              <option value="">detect from the rows</option>
              {Object.entries(KIND_LABEL).map(([k, label]) => <option key={k} value={k}>{label}</option>)}
            </select>
          </Field>
          <Field label="name (optional)">
            <input className="input" placeholder="source:config/split" value={fields.name} onChange={(e) => set({ name: e.target.value })} />
          </Field>
          <Field label="Hugging Face token (gated or private sets)">
            <input className="input font-mono" type="password" autoComplete="off" placeholder="hf_… (never stored)" value={fields.token} onChange={(e) => set({ token: e.target.value })} />
          </Field>
        </div>
        <div>
          <span className="label">field mapping (optional: proposed from the rows when empty)</span>
          <MappingEditor rows={rows} fields={[]} onChange={setRows} emptyText="None given: the server proposes one from the first rows (and says what it guessed)." />
        </div>
        <div>
          <button type="submit" className="btn-cta" disabled={!fields.source.trim() || running}>
            {running ? 'Importing…' : 'Import'}
          </button>
        </div>
      </form>
      {start.isError && (
        <div role="alert" className="card border-bad/60">
          <h3 className="font-semibold text-bad">The import was refused</h3>
          <p className="mt-1 text-sm text-neutral-300">{start.error.message}</p>
        </div>
      )}
      {current && <ImportStatus imp={current} />}
    </div>
  )
}

function ImportStatus({ imp }: { imp: ImportState }) {
  const fraction = imp.rows_total ? imp.rows_done / imp.rows_total : imp.state === 'succeeded' ? 1 : null
  return (
    <section className="card flex flex-col gap-3" aria-label="import progress">
      <div className="flex flex-wrap items-center gap-3 text-sm">
        <span className={`led ${imp.state === 'failed' ? 'bg-bad' : imp.state === 'succeeded' ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'animate-pulse bg-accent'}`} />
        <span className="font-mono">{imp.source}</span>
        <span className="uppercase tracking-wider text-neutral-400">{imp.state}{imp.stage ? ` · ${imp.stage}` : ''}</span>
        <span className="ml-auto font-mono text-neutral-400">
          {imp.rows_done.toLocaleString()}{imp.rows_total ? ` / ${imp.rows_total.toLocaleString()}` : ''} rows
        </span>
      </div>
      {imp.state === 'running' && (fraction !== null ? <ProgressBar value={fraction} /> : <div className="h-1.5 animate-pulse rounded-full bg-accent/40" />)}
      {imp.kind && <p className="text-sm text-neutral-400">stored as <span className="text-neutral-100">{KIND_LABEL[imp.kind as Kind] ?? imp.kind}</span>{imp.mapping && Object.keys(imp.mapping).length > 0 && <> with mapping <code className="font-mono text-accent">{JSON.stringify(imp.mapping)}</code></>}</p>}
      {imp.suggestions.length > 0 && (
        <ul className="list-disc pl-5 text-sm text-neutral-400">{imp.suggestions.map((s) => <li key={s}>{s}</li>)}</ul>
      )}
      {imp.state === 'succeeded' && imp.dataset_id && (
        <Link to={`/datasets/${imp.dataset_id}`} className="btn-cta self-start">Open the new dataset →</Link>
      )}
      {imp.state === 'failed' && <ImportFailure imp={imp} />}
    </section>
  )
}

function ImportFailure({ imp }: { imp: ImportState }) {
  const errors = (imp.errors ?? []) as Schemas['ErrorPublic'][]
  return (
    <div role="alert" className="flex flex-col gap-3 rounded-xl border border-bad/50 bg-bad/5 p-3">
      <p className="text-sm text-bad">{imp.error ?? 'the import failed'}</p>
      {errors.length > 0 && (
        <ValidationSummary errorCount={imp.error_count ?? errors.length} errorCounts={{}} errors={errors} unit="row" />
      )}
    </div>
  )
}
