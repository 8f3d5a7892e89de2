// The title row of a dataset screen, with a way back where there is one.
import type { ReactNode } from 'react'
import { Link } from 'react-router-dom'

export function PageHeader({ title, back, children, sub }: { title: ReactNode; back?: boolean; children?: ReactNode; sub?: ReactNode }) {
  return (
    <header className="mb-6 flex flex-wrap items-end justify-between gap-4">
      <div>
        {back && <Link to="/datasets" className="text-xs uppercase tracking-wider text-neutral-500 hover:text-accent">← datasets</Link>}
        <h1 className="text-2xl font-semibold text-neutral-100">{title}</h1>
        {sub && <div className="mt-1 text-sm text-neutral-400">{sub}</div>}
      </div>
      <div className="flex flex-wrap gap-2">{children}</div>
    </header>
  )
}
