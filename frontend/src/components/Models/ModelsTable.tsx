// The model library: one row per checkpoint with its lineage, key metrics and lifecycle;
// the checkboxes pick two models to compare side by side.
import { Link } from 'react-router-dom'
import { formatDate } from '../Datasets/format'
import { LifecycleSelect } from './LifecycleSelect'
import { keyMetrics, metricValue } from './metrics'
import type { Model } from './queries'

interface Props {
  models: Model[]
  datasetNames: Map<string, string>
  selected: string[]
  onToggle: (id: string) => void
}

export function ModelsTable({ models, datasetNames, selected, onToggle }: Props) {
  return (
    <div className="card overflow-x-auto p-0">
      <table className="w-full text-left text-sm">
        <thead className="text-xs uppercase tracking-wider text-neutral-500">
          <tr className="border-b border-ink-700">
            <th className="w-10 px-4 py-3"><span className="sr-only">compare</span></th>
            <th className="px-3 py-3">model</th>
            <th className="px-3 py-3">base model</th>
            <th className="px-3 py-3">dataset</th>
            <th className="px-3 py-3">job · step</th>
            <th className="px-3 py-3">key metrics</th>
            <th className="px-3 py-3">lifecycle</th>
            <th className="px-4 py-3" />
          </tr>
        </thead>
        <tbody>
          {models.map((m) => (
            <ModelRow key={m.id} model={m} datasetName={m.dataset_id ? datasetNames.get(m.dataset_id) : undefined}
              checked={selected.includes(m.id)} disabled={selected.length >= 2 && !selected.includes(m.id)} onToggle={onToggle} />
          ))}
        </tbody>
      </table>
    </div>
  )
}

interface RowProps {
  model: Model
  datasetName?: string
  checked: boolean
  disabled: boolean
  onToggle: (id: string) => void
}

function ModelRow({ model: m, datasetName, checked, disabled, onToggle }: RowProps) {
  const metrics = keyMetrics(m.metrics)
  return (
    <tr className={`border-b border-ink-700/60 last:border-0 hover:bg-ink-800/60 ${m.lifecycle === 'archived' ? 'opacity-60' : ''}`}>
      <td className="px-4 py-3">
        <input type="checkbox" aria-label={`compare ${m.name}`} className="accent-cta" checked={checked} disabled={disabled} onChange={() => onToggle(m.id)} />
      </td>
      <td className="px-3 py-3">
        <Link to={`/models/${m.id}`} className="font-medium text-neutral-100 hover:text-accent">{m.name}</Link>
        <div className="font-mono text-xs text-neutral-500">{m.id} · {formatDate(m.created_at)}</div>
      </td>
      <td className="px-3 py-3 font-mono text-xs text-neutral-300">{m.base_model}{m.backend === 'tinker' && <span className="ml-1 text-accent">tinker</span>}</td>
      <td className="px-3 py-3 text-xs">
        {m.dataset_id ? (
          <Link to={`/datasets/${m.dataset_id}`} className="text-neutral-300 hover:text-accent">{datasetName ?? m.dataset_id}</Link>
        ) : <span className="text-neutral-500">—</span>}
      </td>
      <td className="px-3 py-3 font-mono text-xs">
        <Link to={`/training/${m.job_id}`} className="text-neutral-300 hover:text-accent">{m.job_id}</Link>
        <div className="text-neutral-500">step {m.step}{m.stage ? ` · ${m.stage}` : ''}</div>
      </td>
      <td className="px-3 py-3">
        {metrics.length === 0 ? <span className="text-xs text-neutral-500">—</span> : (
          <dl className="flex flex-col gap-0.5 text-xs">
            {metrics.map(([k, v]) => (
              <div key={k} className="flex gap-2"><dt className="text-neutral-500">{k}</dt><dd className="font-mono text-neutral-100">{metricValue(v)}</dd></div>
            ))}
          </dl>
        )}
      </td>
      <td className="px-3 py-3"><LifecycleSelect id={m.id} name={m.name} lifecycle={m.lifecycle} /></td>
      <td className="px-4 py-3 text-right">
        <Link to={`/playground?model=${encodeURIComponent(m.id)}`} className="whitespace-nowrap text-xs text-cta hover:underline">Playground →</Link>
      </td>
    </tr>
  )
}
