// The job as requested: top-level fields and its config, with the server's defaults noted
// for keys the request left out.
import type { Job } from './queries'

export function ConfigPanel({ job }: { job: Job }) {
  const top = {
    algorithm: job.algorithm,
    backend: job.backend,
    base_model: job.base_model,
    dataset_id: job.dataset_id,
    priority: job.priority,
    resource: job.resource,
    device: job.device,
    attempts: job.attempts,
  }
  return (
    <div className="grid gap-4 lg:grid-cols-[minmax(0,1fr)_minmax(0,2fr)]">
      <div className="card">
        <h3 className="label">Job</h3>
        <dl className="mt-2 grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 text-sm">
          {Object.entries(top).map(([k, v]) => (
            <div key={k} className="contents">
              <dt className="text-neutral-500">{k}</dt>
              <dd className="break-all font-mono text-neutral-200">{v === null || v === undefined ? '—' : String(v)}</dd>
            </div>
          ))}
        </dl>
      </div>
      <div className="card">
        <h3 className="label">config (as requested; keys left out take the server's defaults — see TRAINING_GUIDE.md)</h3>
        <pre className="mt-2 overflow-x-auto rounded-xl bg-ink-950 p-4 font-mono text-xs text-neutral-300">
          {JSON.stringify(job.config, null, 2)}
        </pre>
      </div>
    </div>
  )
}
