// Loading, empty and error states: every view shows one of these before its data.
import type { ReactNode } from 'react'
import { errorMessage } from '../../api/client'
import type { JobState } from '../../api/vocabulary'

export function Loading({ what }: { what: string }) {
  return (
    <div role="status" className="flex items-center gap-3 p-6 text-neutral-400">
      <span className="led bg-accent animate-pulse" /> Loading {what}…
    </div>
  )
}

export function Empty({ title, next }: { title: string; next: ReactNode }) {
  return (
    <div className="card flex flex-col items-start gap-3 border-dashed">
      <h3 className="text-lg font-semibold text-neutral-100">{title}</h3>
      <div className="text-sm text-neutral-400">{next}</div>
    </div>
  )
}

export function ErrorState({ error, what }: { error: unknown; what: string }) {
  return (
    <div role="alert" className="card border-bad/60">
      <h3 className="font-semibold text-bad">Could not load {what}</h3>
      <p className="mt-1 text-sm text-neutral-300">{errorMessage(error)}</p>
      <p className="mt-2 text-xs text-neutral-500">
        Check that the server is running (<code>./START_UI.sh</code>) and, if it requires a
        token, that one is set in Settings. Then reload.
      </p>
    </div>
  )
}

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
