// One dataset version: what it is, how training sees it, its statistics, its lineage, and
// what used it.
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { useNavigate, useParams } from 'react-router-dom'
import { api, errorMessage } from '../../api/client'
import { formatBytes, formatDate } from '../../components/Datasets/format'
import { downloadFile } from '../../components/Datasets/http'
import { BuiltinBadge, KindBadge } from '../../components/Datasets/KindBadge'
import { PreviewPanel } from '../../components/Datasets/PreviewPanel'
import { useDataset, type DatasetDetail, type RenderOptions } from '../../components/Datasets/queries'
import { RenderControls } from '../../components/Datasets/RenderControls'
import { StatsPanel } from '../../components/Datasets/StatsPanel'
import { UsagePanel } from '../../components/Datasets/UsagePanel'
import { VersionsPanel } from '../../components/Datasets/VersionsPanel'
import { Section } from '../../components/ui/Section'
import { ErrorState, Loading } from '../../components/ui/States'
import { PageHeader } from './PageHeader'

export function DatasetPage() {
  const { id = '' } = useParams()
  const dataset = useDataset(id)
  const [options, setOptions] = useState<RenderOptions>({})
  if (dataset.isPending) return <Loading what="dataset" />
  if (dataset.isError) return <><PageHeader back title="Dataset" /><ErrorState error={dataset.error} what={`dataset ${id}`} /></>
  const d = dataset.data
  return (
    <div className="flex flex-col gap-5">
      <PageHeader back title={<span className="flex items-center gap-3">{d.name} {d.builtin && <BuiltinBadge />}</span>}
        sub={<span className="flex flex-wrap items-center gap-3"><KindBadge kind={d.kind} /><span className="font-mono">{d.id} · v{d.version}</span></span>}>
        <Actions dataset={d} />
      </PageHeader>
      <Facts dataset={d} />
      <Section title="How training sees it" aside={<RenderControls value={options} onChange={setOptions} />}>
        <PreviewPanel key={JSON.stringify(options)} id={d.id} options={options} />
      </Section>
      <Section title="Statistics"><StatsPanel id={d.id} options={options} /></Section>
      <div className="grid gap-5 xl:grid-cols-2">
        <Section title="Versions"><VersionsPanel key={d.id} dataset={d} /></Section>
        <Section title="Used by"><UsagePanel dataset={d} /></Section>
      </div>
    </div>
  )
}

function Facts({ dataset: d }: { dataset: DatasetDetail }) {
  const facts: [string, string][] = [
    ['rows', d.num_rows.toLocaleString()],
    ['size', formatBytes(d.size_bytes)],
    ['uploaded as', `${d.source_format} · ${d.filename}`],
    ['created', formatDate(d.created_at)],
    ['sha256', d.sha256.slice(0, 16) + '…'],
  ]
  if (d.mapping) facts.push(['mapping', Object.entries(d.mapping).map(([k, v]) => `${k} ← ${v}`).join(', ')])
  const hf = (d.origin as { hf?: { repo?: string; path?: string; split?: string } } | null)?.hf
  if (hf) facts.push(['imported from', `${hf.repo ?? hf.path ?? ''}${hf.split ? ` (${hf.split})` : ''}`])
  return (
    <dl className="card flex flex-wrap gap-x-10 gap-y-4">
      {facts.map(([label, value]) => (
        <div key={label} className="min-w-0 max-w-md">
          <dt className="label">{label}</dt>
          <dd className="truncate font-mono text-sm text-neutral-100" title={value}>{value}</dd>
        </div>
      ))}
    </dl>
  )
}

function Actions({ dataset }: { dataset: DatasetDetail }) {
  const client = useQueryClient()
  const navigate = useNavigate()
  const [downloadError, setDownloadError] = useState<string | null>(null)
  const remove = useMutation({
    mutationFn: async () => {
      const { error, response } = await api.DELETE('/api/datasets/{dataset_id}', { params: { path: { dataset_id: dataset.id } } })
      if (!response.ok) throw new Error(errorMessage(error ?? `HTTP ${response.status}`))
    },
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ['datasets'] })
      navigate('/datasets')
    },
  })
  const download = () =>
    downloadFile(`/api/datasets/${dataset.id}/download`, `${dataset.name}.jsonl`).catch((e: unknown) => setDownloadError(errorMessage(e)))
  const confirmDelete = () => {
    if (window.confirm(`Delete ${dataset.name} (v${dataset.version})? Finished jobs keep their records; this cannot be undone.`)) remove.mutate()
  }
  return (
    <div className="flex flex-col items-end gap-2">
      <div className="flex gap-2">
        <button type="button" className="btn-ghost" onClick={download}>Download JSONL</button>
        <button type="button" className="btn-ghost hover:border-bad hover:text-bad" disabled={remove.isPending} onClick={confirmDelete}>Delete</button>
      </div>
      {(remove.isError || downloadError) && (
        <p role="alert" className="max-w-md text-right text-sm text-bad">{remove.error?.message ?? downloadError}</p>
      )}
    </div>
  )
}
