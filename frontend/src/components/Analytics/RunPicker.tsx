// Choosing the runs to compare: every job, newest first, toggled on and off.
import type { Schemas } from '../../api/client'
import { StatusLed } from '../ui/Status'
import { runColor } from './palette'

type Job = Schemas['JobPublic']

interface Props {
  jobs: Job[]
  selected: string[]
  onToggle: (id: string) => void
}

export function RunPicker({ jobs, selected, onToggle }: Props) {
  return (
    <div className="card h-fit p-3">
      <div className="mb-2 flex items-center justify-between px-2">
        <span className="label mb-0">Runs</span>
        <span className="text-xs text-neutral-500">{selected.length} selected · up to 8</span>
      </div>
      <ul className="flex max-h-[340px] flex-col gap-1 overflow-y-auto">
        {jobs.map((job) => {
          const index = selected.indexOf(job.id)
          const on = index !== -1
          return (
            <li key={job.id}>
              <button
                aria-pressed={on}
                disabled={!on && selected.length >= 8}
                onClick={() => onToggle(job.id)}
                className={`flex w-full items-center gap-3 rounded-xl px-2 py-2 text-left text-sm transition disabled:opacity-40 ${on ? 'bg-ink-700' : 'hover:bg-ink-800'}`}
              >
                <span className="h-3 w-3 shrink-0 rounded-sm border border-ink-600"
                  style={on ? { background: runColor(index), borderColor: runColor(index), boxShadow: `0 0 8px ${runColor(index)}` } : undefined} />
                <span className="min-w-0 flex-1">
                  <span className="block truncate text-neutral-100">{job.name}</span>
                  <span className="block truncate text-xs text-neutral-500">
                    {job.algorithm.toUpperCase()} · step {job.step}{job.total_steps ? `/${job.total_steps}` : ''} · {job.base_model}
                  </span>
                </span>
                <span title={job.state} className="shrink-0 scale-90"><StatusLed state={job.state} /></span>
              </button>
            </li>
          )
        })}
      </ul>
    </div>
  )
}
