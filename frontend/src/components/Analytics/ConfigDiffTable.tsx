// Configs side by side; rows where the runs disagree are highlighted, and can be shown alone.
import { useState } from 'react'
import type { Schemas } from '../../api/client'
import { diffConfigs } from './configDiff'
import { runColor } from './palette'

type Job = Schemas['JobPublic']

/** What defines a run beyond `config`: the algorithm, model and data it trained. */
function runSettings(job: Job): Record<string, unknown> {
  return { algorithm: job.algorithm, backend: job.backend, base_model: job.base_model, dataset_id: job.dataset_id, ...job.config }
}

export function ConfigDiffTable({ jobs }: { jobs: Job[] }) {
  const [onlyDiff, setOnlyDiff] = useState(false)
  const rows = diffConfigs(jobs.map(runSettings))
  const differing = rows.filter((r) => r.differs).length
  const shown = onlyDiff ? rows.filter((r) => r.differs) : rows
  return (
    <div className="card">
      <div className="mb-3 flex items-center gap-3">
        <h2 className="font-semibold text-neutral-100">Configs</h2>
        <span className="text-xs text-neutral-500">
          {jobs.length < 2 ? 'select another run to compare' : differing === 1 ? '1 setting differs' : `${differing} settings differ`}
        </span>
        <label className="ml-auto flex items-center gap-2 text-xs text-neutral-400">
          <input type="checkbox" checked={onlyDiff} onChange={(e) => setOnlyDiff(e.target.checked)} /> only differences
        </label>
      </div>
      <div className="overflow-x-auto">
        <table className="w-full text-sm">
          <thead>
            <tr className="text-left text-xs uppercase tracking-wider text-neutral-500">
              <th className="py-2 pr-4 font-medium">Setting</th>
              {jobs.map((job, i) => (
                <th key={job.id} className="py-2 pr-4 font-medium" style={{ color: runColor(i) }}>{job.name}</th>
              ))}
            </tr>
          </thead>
          <tbody className="font-mono text-xs">
            {shown.map((row) => (
              <tr key={row.key} data-differs={row.differs} className={`border-t border-ink-700 ${row.differs ? 'bg-warn/10' : ''}`}>
                <td className={`py-1.5 pr-4 ${row.differs ? 'text-warn' : 'text-neutral-400'}`}>
                  {row.differs && <span className="mr-1" aria-label="differs">●</span>}{row.key}
                </td>
                {row.values.map((v, i) => (
                  <td key={jobs[i].id} className={`max-w-64 truncate py-1.5 pr-4 ${row.differs ? 'text-neutral-100' : 'text-neutral-400'}`} title={v}>
                    {v ?? <span className="text-neutral-600">—</span>}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  )
}
