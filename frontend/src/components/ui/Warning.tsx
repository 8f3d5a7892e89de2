// A warning line: what to watch out for, beside what it is about.
import type { ReactNode } from 'react'

export function Warning({ children }: { children: ReactNode }) {
  return (
    <p role="alert" className="flex items-start gap-2 rounded-lg border border-warn/40 bg-warn/10 px-2 py-1 text-xs text-warn">
      <span aria-hidden>⚠</span>
      <span>{children}</span>
    </p>
  )
}
