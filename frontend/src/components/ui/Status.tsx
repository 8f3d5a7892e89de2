// A job's state as a coloured LED, and a progress bar.
import type { JobState } from '../../api/vocabulary'

const LED: Record<JobState, string> = {
  queued: 'bg-neutral-400',
  starting: 'bg-accent animate-pulse',
  running: 'bg-accent shadow-[0_0_10px_#0ea5e9] animate-pulse',
  succeeded: 'bg-ok shadow-[0_0_8px_#22c55e]',
  failed: 'bg-bad shadow-[0_0_8px_#ef4444]',
  cancelled: 'bg-neutral-600',
  paused: 'bg-warn',
  interrupted: 'bg-warn shadow-[0_0_8px_#f59e0b]',
}

export function StatusLed({ state }: { state: string }) {
  return (
    <span className="inline-flex items-center gap-2 text-xs uppercase tracking-wider">
      <span className={`led ${LED[state as JobState] ?? 'bg-neutral-500'}`} aria-hidden />
      {state}
    </span>
  )
}

export function ProgressBar({ value }: { value: number | null | undefined }) {
  const pct = Math.round(Math.min(1, Math.max(0, value ?? 0)) * 100)
  return (
    <div className="h-1.5 w-full rounded-full bg-ink-700" role="progressbar" aria-valuenow={pct}>
      <div className="h-1.5 rounded-full bg-accent" style={{ width: `${pct}%` }} />
    </div>
  )
}
