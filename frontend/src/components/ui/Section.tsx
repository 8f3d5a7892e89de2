// A titled card: one part of a detail page.
import type { ReactNode } from 'react'

export function Section({ title, aside, children }: { title: string; aside?: ReactNode; children: ReactNode }) {
  return (
    <section className="card flex flex-col gap-4">
      <h2 className="text-sm font-semibold uppercase tracking-wider text-neutral-300">{title}</h2>
      {aside}
      {children}
    </section>
  )
}
