// Evaluation results: each run's last value of every eval metric, the best one marked.
import { formatNumber, lowerIsBetter } from './metrics'
import { runColor } from './palette'

export interface EvalRun {
  id: string
  name: string
  evals: Record<string, number>
}

export function EvalTable({ runs }: { runs: EvalRun[] }) {
  const names = [...new Set(runs.flatMap((r) => Object.keys(r.evals)))].sort()
  const best = (name: string) => {
    const values = runs.map((r) => r.evals[name]).filter((v): v is number => v !== undefined)
    return lowerIsBetter(name) ? Math.min(...values) : Math.max(...values)
  }
  return (
    <div className="card">
      <h2 className="mb-1 font-semibold text-neutral-100">Evaluation results</h2>
      <p className="mb-3 text-xs text-neutral-500">The last value each run logged on its held-out set; the best is marked.</p>
      {names.length === 0 ? (
        <p className="text-sm text-neutral-500">
          None of these runs logged an evaluation. Give a job an eval dataset (<code>eval_dataset_id</code>) and
          <code> eval_every</code> to see held-out figures here.
        </p>
      ) : (
        <table className="w-full text-sm">
          <thead>
            <tr className="text-left text-xs uppercase tracking-wider text-neutral-500">
              <th className="py-2 pr-4 font-medium">Run</th>
              {names.map((n) => <th key={n} className="py-2 pr-4 font-medium">{n}</th>)}
            </tr>
          </thead>
          <tbody>
            {runs.map((run, i) => (
              <tr key={run.id} className="border-t border-ink-700">
                <td className="py-2 pr-4" style={{ color: runColor(i) }}>{run.name}</td>
                {names.map((n) => {
                  const v = run.evals[n]
                  const top = v !== undefined && runs.length > 1 && v === best(n)
                  return (
                    <td key={n} className={`py-2 pr-4 font-mono ${top ? 'text-cta' : 'text-neutral-300'}`}>
                      {v === undefined ? '—' : formatNumber(v)}{top && ' ★'}
                    </td>
                  )
                })}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}
