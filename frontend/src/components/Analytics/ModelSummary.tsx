// Summary numbers per model: the metrics at each checkpoint's step, from the model library.
import { useState } from 'react'
import { Link } from 'react-router-dom'
import type { Schemas } from '../../api/client'
import { formatNumber } from './metrics'

type Model = Schemas['ModelPublic']

/** Bookkeeping, not quality: left out of the summary so the columns that matter fit. */
const SKIP = new Set(['step', 'time', 'num_tokens', 'num_sequences', 'step_time_s', 'learning_rate', 'grad_norm', 'param_norm', 'stage'])
const QUALITY = /(nll|loss|reward|accuracy|exact|margin|kl|entropy)/

function summaryColumns(models: Model[]): string[] {
  const keys = new Set<string>()
  for (const m of models)
    for (const [k, v] of Object.entries(m.metrics)) if (!SKIP.has(k) && typeof v === 'number') keys.add(k)
  return [...keys].sort((a, b) => Number(QUALITY.test(b)) - Number(QUALITY.test(a)) || a.localeCompare(b)).slice(0, 6)
}

interface Props {
  models: Model[]
  jobNames: Map<string, string>
  selectedJobs: string[]
}

export function ModelSummary({ models, jobNames, selectedJobs }: Props) {
  const [all, setAll] = useState(false)
  const shown = all ? models : models.filter((m) => selectedJobs.includes(m.job_id))
  const columns = summaryColumns(shown)
  return (
    <div className="card">
      <div className="mb-3 flex items-center gap-3">
        <h2 className="font-semibold text-neutral-100">Models</h2>
        <span className="text-xs text-neutral-500">final metrics of each checkpoint</span>
        <label className="ml-auto flex items-center gap-2 text-xs text-neutral-400">
          <input type="checkbox" checked={all} onChange={(e) => setAll(e.target.checked)} /> all models ({models.length})
        </label>
      </div>
      {shown.length === 0 ? (
        <p className="text-sm text-neutral-500">The selected runs have saved no checkpoint yet; models appear as they save one.</p>
      ) : (
        <div className="overflow-x-auto">
          <table className="w-full text-sm">
            <thead>
              <tr className="text-left text-xs uppercase tracking-wider text-neutral-500">
                <th className="py-2 pr-4 font-medium">Model</th>
                <th className="py-2 pr-4 font-medium">Run</th>
                <th className="py-2 pr-4 font-medium">Step</th>
                {columns.map((c) => <th key={c} className="py-2 pr-4 font-medium">{c}</th>)}
                <th />
              </tr>
            </thead>
            <tbody>
              {shown.map((m) => (
                <tr key={m.id} className="border-t border-ink-700">
                  <td className="py-2 pr-4 text-neutral-100">{m.name}<div className="text-xs text-neutral-500">{m.base_model}</div></td>
                  <td className="py-2 pr-4 text-neutral-400">{jobNames.get(m.job_id) ?? m.job_id}</td>
                  <td className="py-2 pr-4 font-mono text-neutral-300">{m.step}</td>
                  {columns.map((c) => {
                    const v = m.metrics[c]
                    return <td key={c} className="py-2 pr-4 font-mono text-neutral-300">{typeof v === 'number' ? formatNumber(v) : '—'}</td>
                  })}
                  <td className="py-2 text-right">
                    <Link className="text-xs text-accent hover:underline" to={`/playground?model=${encodeURIComponent(m.id)}`}>Try in playground →</Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  )
}
