// The job as it runs: top-level fields and its config (the request's settings, with the
// server's proposal filled in for those it left out).
import { autoResumeUse, parsePlacement, placementText } from './attempts'
import type { Job } from './queries'

export function ConfigPanel({ job }: { job: Job }) {
  const placement = parsePlacement(job.placement)
  const top = {
    algorithm: job.algorithm,
    backend: job.backend,
    base_model: job.base_model,
    parent_model_id: job.parent_model_id,
    dataset_id: job.dataset_id,
    priority: job.priority,
    resource: job.resource,
    device: job.device,
    attempts: job.attempts,
    gpus: job.gpus > 1 ? `${job.gpus} (data-parallel)` : job.gpus,
    auto_resume: autoResumeUse(job),
    placement: placement && placementText(placement),
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
        <h3 className="label">config (as it runs: the request's settings, the server's proposal for the rest)</h3>
        <pre className="mt-2 overflow-x-auto rounded-xl bg-ink-950 p-4 font-mono text-xs text-neutral-300">
          {JSON.stringify(job.config, null, 2)}
        </pre>
      </div>
    </div>
  )
}
