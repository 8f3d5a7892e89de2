// Upload with the validator and previewer: nothing is stored until the user has seen what
// the file holds, confirmed the mapping, and pressed "Store dataset".
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { useNavigate } from 'react-router-dom'
import { errorMessage } from '../../api/client'
import { DATASET_KINDS } from '../../api/vocabulary'
import { KIND_LABEL } from './format'
import { detectDataset, rejectionOf, storeDataset, type Detection, type Kind } from './http'
import { MappingEditor } from './MappingEditor'
import { mappingFromRows, rowsFromMapping, type MappingRow } from './mapping'
import { SampleTable } from './SampleTable'
import { SuggestionList } from './SuggestionList'
import { applyAction, type SuggestionAction } from './suggestions'
import { ValidationSummary } from './ValidationSummary'

export function UploadPanel() {
  const [file, setFile] = useState<File | null>(null)
  const [detection, setDetection] = useState<Detection | null>(null)
  const [kind, setKind] = useState<Kind | null>(null)
  const [rows, setRows] = useState<MappingRow[]>([])
  const [name, setName] = useState('')
  const detect = useMutation({ mutationFn: detectDataset })
  const store = useStoreDataset()
  const mapping = mappingFromRows(rows)

  const runDetect = (target: File, withChoices: boolean) => {
    store.reset()
    detect.mutate(
      withChoices ? { file: target, kind, mapping } : { file: target },
      {
        onSuccess: (result) => {
          setDetection(result)
          setKind(result.kind)
          setRows(rowsFromMapping(result.mapping))
        },
      },
    )
  }
  const choose = (chosen: File | null) => {
    setFile(chosen)
    setDetection(null)
    if (chosen) {
      setName(chosen.name.replace(/\.[^.]+$/, ''))
      runDetect(chosen, false)
    }
  }
  const apply = (action: SuggestionAction) => {
    setRows(rowsFromMapping(applyAction(mapping, action)))
    if (action.kind) setKind(action.kind)
  }
  const checked = detection !== null && sameChoice(detection, kind, mapping)

  return (
    <div className="flex flex-col gap-5">
      <FileStep file={file} onChoose={choose} busy={detect.isPending} />
      {detect.isError && <DetectError error={detect.error} />}
      {detection && file && (
        <>
          <section className="card flex flex-col gap-4">
            <StepTitle n={2} title="What the file holds" />
            <div className="flex flex-wrap gap-6 text-sm">
              <Fact label="format" value={detection.format.toUpperCase()} />
              <Fact label="detected kind" value={detection.kind ? KIND_LABEL[detection.kind] : 'none fits'} />
              <Fact label="fields" value={detection.fields.join(', ') || '—'} />
            </div>
            <SampleTable fields={detection.fields} rows={detection.sample} />
          </section>
          <section className="card flex flex-col gap-4">
            <StepTitle n={3} title="Confirm the kind and the field mapping" />
            <label className="flex max-w-xs flex-col">
              <span className="label">kind</span>
              <select
                className="input"
                aria-label="kind"
                value={kind ?? ''}
                onChange={(e) => setKind((e.target.value || null) as Kind | null)}
              >
                <option value="">choose a kind…</option>
                {DATASET_KINDS.map((k) => <option key={k} value={k}>{KIND_LABEL[k]}</option>)}
              </select>
            </label>
            <SuggestionList suggestions={detection.suggestions} mapping={mapping} kind={kind} onApply={apply} />
            <MappingEditor rows={rows} fields={detection.fields} onChange={setRows} />
            <div>
              <button type="button" className="btn-ghost" disabled={detect.isPending} onClick={() => runDetect(file, true)}>
                {detect.isPending ? 'Checking…' : 'Check again with this mapping'}
              </button>
            </div>
          </section>
          <section className="card flex flex-col gap-4">
            <StepTitle n={4} title="Validation" />
            {!checked && (
              <p className="text-sm text-warn">The mapping changed since this check: check again to see its result.</p>
            )}
            <ValidationSummary
              rows={detection.validation.rows}
              errorCount={detection.validation.error_count}
              errorCounts={detection.validation.error_counts}
              errors={detection.validation.errors}
              unit={lineUnit(detection.format)}
              kindKnown={!!detection.validation.kind}
            />
          </section>
          <StoreStep
            name={name}
            onName={setName}
            canStore={kind !== null}
            problems={checked ? detection.validation.error_count : 0}
            pending={store.isPending}
            onStore={() => store.mutate({ file, kind, mapping, name: name.trim() || undefined })}
          />
          {store.isError && <StoreError error={store.error} unit={lineUnit(detection.format)} />}
        </>
      )}
    </div>
  )
}

function useStoreDataset() {
  const client = useQueryClient()
  const navigate = useNavigate()
  return useMutation({
    mutationFn: storeDataset,
    onSuccess: (dataset) => {
      client.invalidateQueries({ queryKey: ['datasets'] })
      navigate(`/datasets/${dataset.id}`)
    },
  })
}

/** Whether the shown validation is of the kind and mapping now chosen. */
function sameChoice(detection: Detection, kind: Kind | null, mapping: Record<string, string>): boolean {
  const a = JSON.stringify(Object.entries(detection.validation.mapping).sort())
  const b = JSON.stringify(Object.entries(mapping).sort())
  return a === b && (detection.validation.kind ?? null) === kind
}

/** JSONL and CSV errors count lines of the file; JSON and Parquet count rows. */
function lineUnit(format: string): string {
  return format === 'jsonl' || format === 'csv' ? 'line' : 'row'
}

function StepTitle({ n, title }: { n: number; title: string }) {
  return (
    <h3 className="flex items-center gap-3 text-sm font-semibold uppercase tracking-wider text-neutral-300">
      <span className="flex h-6 w-6 items-center justify-center rounded-full bg-accent/15 text-xs text-accent">{n}</span>
      {title}
    </h3>
  )
}

function Fact({ label, value }: { label: string; value: string }) {
  return (
    <div>
      <div className="label">{label}</div>
      <div className="font-mono text-neutral-100">{value}</div>
    </div>
  )
}

function FileStep({ file, onChoose, busy }: { file: File | null; onChoose: (f: File | null) => void; busy: boolean }) {
  return (
    <section className="card flex flex-col gap-3">
      <StepTitle n={1} title="Choose a file" />
      <p className="text-sm text-neutral-400">
        JSONL, JSON, CSV or Parquet. It is checked row by row and nothing is stored until you confirm.
      </p>
      <label className="flex cursor-pointer items-center gap-4 rounded-xl border border-dashed border-ink-600 p-4 hover:border-accent">
        <span className="btn-ghost pointer-events-none">Choose file</span>
        <span className="text-sm text-neutral-300">{file ? file.name : 'no file chosen'}</span>
        {busy && <span className="text-sm text-accent">reading…</span>}
        <input
          type="file"
          aria-label="dataset file"
          className="sr-only"
          accept=".jsonl,.ndjson,.json,.csv,.parquet,.pq"
          onChange={(e) => onChoose(e.target.files?.[0] ?? null)}
        />
      </label>
    </section>
  )
}

function StoreStep(props: { name: string; onName: (n: string) => void; canStore: boolean; problems: number; pending: boolean; onStore: () => void }) {
  return (
    <section className="card flex flex-wrap items-end gap-4">
      <label className="flex min-w-64 flex-1 flex-col">
        <span className="label">dataset name</span>
        <input className="input" value={props.name} onChange={(e) => props.onName(e.target.value)} />
      </label>
      <button type="button" className="btn-cta" disabled={!props.canStore || props.problems > 0 || props.pending} onClick={props.onStore}>
        {props.pending ? 'Storing…' : 'Store dataset'}
      </button>
      {!props.canStore && <p className="w-full text-xs text-warn">Choose a kind first.</p>}
      {props.canStore && props.problems > 0 && (
        <p className="w-full text-xs text-warn">
          Validation found {props.problems} problem{props.problems === 1 ? '' : 's'}: the server stores nothing until every row
          passes. Fix the file or the mapping, then check again; storing is possible once the check passes.
        </p>
      )}
    </section>
  )
}

function DetectError({ error }: { error: unknown }) {
  const rejection = rejectionOf(error)
  return (
    <div role="alert" className="card border-bad/60">
      <h3 className="font-semibold text-bad">The file could not be read</h3>
      <p className="mt-1 text-sm text-neutral-300">{errorMessage(rejection?.detail ?? error)}</p>
      {rejection && rejection.errors.length > 0 && (
        <div className="mt-3">
          <ValidationSummary errorCount={rejection.error_count} errorCounts={rejection.error_counts} errors={rejection.errors} />
        </div>
      )}
    </div>
  )
}

function StoreError({ error, unit }: { error: unknown; unit: string }) {
  const rejection = rejectionOf(error)
  return (
    <div role="alert" className="card flex flex-col gap-3 border-bad/60">
      <h3 className="font-semibold text-bad">The server refused the upload — nothing was stored</h3>
      <p className="text-sm text-neutral-300">{rejection ? rejection.detail : errorMessage(error)}</p>
      {rejection && (
        <ValidationSummary
          errorCount={rejection.error_count}
          errorCounts={rejection.error_counts}
          errors={rejection.errors}
          unit={unit}
        />
      )}
    </div>
  )
}
