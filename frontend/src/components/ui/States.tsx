// Loading, empty and error states: every view shows one of these before its data.
import type { ReactNode } from 'react'
import { errorMessage } from '../../api/client'

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
