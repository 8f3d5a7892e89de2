// The jobs that read this dataset and the models trained on it: what deleting it affects.
import { Link } from 'react-router-dom'
import { StatusLed } from '../ui/Status'
import type { DatasetDetail } from './queries'

export function UsagePanel({ dataset }: { dataset: DatasetDetail }) {
  return (
    <div className="grid gap-5 md:grid-cols-2">
      <div>
        <div className="label">jobs ({dataset.jobs.length})</div>
        {dataset.jobs.length === 0 ? (
          <p className="text-sm text-neutral-500">No job has used it yet. Start one from <Link className="text-accent hover:underline" to="/training">Training</Link>.</p>
        ) : (
          <ul className="flex flex-col gap-1">
            {dataset.jobs.map((job) => (
              <li key={job.id} className="flex items-center justify-between gap-3 rounded-lg px-2 py-1.5 hover:bg-ink-800">
                <Link to={`/training/${job.id}`} className="text-sm text-neutral-100 hover:text-accent">{job.name}</Link>
                <StatusLed state={job.state} />
              </li>
            ))}
          </ul>
        )}
      </div>
      <div>
        <div className="label">models ({dataset.models.length})</div>
        {dataset.models.length === 0 ? (
          <p className="text-sm text-neutral-500">No model has been trained on it yet.</p>
        ) : (
          <ul className="flex flex-col gap-1">
            {dataset.models.map((model) => (
              <li key={model.id} className="flex items-center justify-between gap-3 rounded-lg px-2 py-1.5 hover:bg-ink-800">
                <Link to={`/models/${model.id}`} className="text-sm text-neutral-100 hover:text-accent">{model.name}</Link>
                <span className="font-mono text-xs text-neutral-500">step {model.step} · {model.lifecycle}</span>
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  )
}
