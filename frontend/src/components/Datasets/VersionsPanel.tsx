// The lineage of a dataset (every version, this one marked) and the form that makes the
// next version: a stored version never changes, so edits always make a new one.
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useNavigate } from 'react-router-dom'
import { api, errorMessage, type Schemas } from '../../api/client'
import { formatDate, KIND_LABEL } from './format'
import type { Kind } from './http'
import { parseLines } from './lines'
import { MappingEditor } from './MappingEditor'
import { mappingFromRows, type MappingRow } from './mapping'
import type { DatasetDetail } from './queries'
import { ValidationSummary } from './ValidationSummary'

type VersionBody = Schemas['DatasetVersionCreate']
type Rejection = Schemas['UploadRejectedPublic']

export function VersionsPanel({ dataset }: { dataset: DatasetDetail }) {
  return (
    <div className="flex flex-col gap-5">
      <ol className="flex flex-col gap-1">
        {dataset.versions.map((v) => (
          <li key={v.id} className={`flex flex-wrap items-center gap-4 rounded-xl px-3 py-2 text-sm ${v.id === dataset.id ? 'bg-ink-800 ring-1 ring-accent/40' : ''}`}>
            <span className="w-10 font-mono text-accent">v{v.version}</span>
            {v.id === dataset.id ? (
              <span className="font-mono text-neutral-100">{v.id} <span className="text-xs text-neutral-500">(this one)</span></span>
            ) : (
              <Link to={`/datasets/${v.id}`} className="font-mono text-neutral-300 hover:text-accent">{v.id}</Link>
            )}
            <span className="font-mono text-neutral-400">{v.num_rows.toLocaleString()} rows</span>
            <span className="font-mono text-xs text-neutral-500" title={v.sha256}>sha {v.sha256.slice(0, 12)}</span>
            <span className="text-xs text-neutral-500">{formatDate(v.created_at)}</span>
          </li>
        ))}
      </ol>
      <NewVersionForm dataset={dataset} />
    </div>
  )
}

function useCreateVersion(id: string) {
  const client = useQueryClient()
  const navigate = useNavigate()
  return useMutation({
    mutationFn: async (body: VersionBody) => {
      const result = await api.POST('/api/datasets/{dataset_id}/versions', {
        params: { path: { dataset_id: id } },
        body,
      })
      if (result.data) return result.data
      const status = result.response.status
      throw Object.assign(new Error(errorMessage(result.error ?? `HTTP ${status}`)), {
        body: result.error,
      })
    },
    onSuccess: (created) => {
      client.invalidateQueries({ queryKey: ['datasets'] })
      client.invalidateQueries({ queryKey: ['dataset'] })
      navigate(`/datasets/${created.id}`)
    },
  })
}

function NewVersionForm({ dataset }: { dataset: DatasetDetail }) {
  const [deleteText, setDeleteText] = useState('')
  const [rows, setRows] = useState<MappingRow[]>([])
  const [kind, setKind] = useState<Kind>(dataset.kind)
  const create = useCreateVersion(dataset.id)
  const lines = parseLines(deleteText)
  const mapping = mappingFromRows(rows)
  const body: VersionBody = {
    ...(lines && lines.length ? { delete: lines } : {}),
    ...(Object.keys(mapping).length ? { mapping } : {}),
    ...(kind !== dataset.kind ? { kind } : {}),
  }
  const changes = Object.keys(body).length > 0
  return (
    <form className="flex flex-col gap-4 rounded-xl border border-ink-700 p-4" onSubmit={(e) => { e.preventDefault(); create.mutate(body) }}>
      <h4 className="text-sm font-semibold text-neutral-200">Make version {Math.max(...dataset.versions.map((v) => v.version), dataset.version) + 1}</h4>
      <label className="flex flex-col">
        <span className="label">delete lines</span>
        <input className="input font-mono" placeholder="e.g. 4, 17-19" value={deleteText} onChange={(e) => setDeleteText(e.target.value)} />
        {lines === null && <span className="mt-1 text-xs text-bad">Write line numbers from 1, separated by commas; ranges as 7-9.</span>}
      </label>
      <div>
        <span className="label">re-map fields (applied to every row)</span>
        <MappingEditor rows={rows} fields={[]} onChange={setRows} emptyText="No re-mapping: the rows keep their fields." />
      </div>
      <label className="flex max-w-xs flex-col">
        <span className="label">kind</span>
        <select className="input" value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
          {Object.entries(KIND_LABEL).map(([k, label]) => <option key={k} value={k}>{label}</option>)}
        </select>
      </label>
      <div>
        <button type="submit" className="btn-cta" disabled={!changes || lines === null || create.isPending}>
          {create.isPending ? 'Checking…' : 'Make new version'}
        </button>
      </div>
      {create.isError && <VersionError error={create.error} />}
    </form>
  )
}

function VersionError({ error }: { error: Error }) {
  const body = (error as Error & { body?: Partial<Rejection> }).body
  return (
    <div role="alert" className="flex flex-col gap-2 rounded-xl border border-bad/50 bg-bad/5 p-3 text-sm">
      <p className="text-bad">{error.message}</p>
      {body && Array.isArray(body.errors) && (
        <ValidationSummary errorCount={body.error_count ?? body.errors.length} errorCounts={body.error_counts ?? {}} errors={body.errors} />
      )}
    </div>
  )
}
