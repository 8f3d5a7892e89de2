// Any URL the dashboard does not know: say so, and offer the five views.
import { Link, useLocation } from 'react-router-dom'

const VIEWS = [
  { to: '/training', label: 'Training', what: 'jobs, the wizard, live metrics' },
  { to: '/models', label: 'Models', what: 'every checkpoint, its lineage and export' },
  { to: '/datasets', label: 'Datasets', what: 'upload, validate, import from the Hub' },
  { to: '/playground', label: 'Playground', what: 'chat with a model, compare two' },
  { to: '/analytics', label: 'Analytics', what: 'runs side by side' },
]

export function NotFoundPage() {
  const { pathname } = useLocation()
  return (
    <div className="mx-auto flex max-w-3xl flex-col gap-6">
      <header>
        <p className="font-mono text-xs tracking-[0.3em] text-accent">404</p>
        <h1 className="text-2xl font-semibold text-neutral-100">Page not found</h1>
        <p className="mt-1 text-sm text-neutral-400">
          Nothing lives at <code className="rounded bg-ink-950 px-1.5 py-0.5 font-mono text-neutral-300">{pathname}</code>. The link may be old, or mistyped.
        </p>
      </header>
      <nav aria-label="views" className="grid gap-3 sm:grid-cols-2">
        {VIEWS.map((v) => (
          <Link key={v.to} to={v.to} className="card transition hover:border-accent/70">
            <span className="font-medium text-neutral-100">{v.label}</span>
            <span className="mt-1 block text-xs text-neutral-500">{v.what}</span>
          </Link>
        ))}
      </nav>
    </div>
  )
}
