// The shell: a sidebar with the five views (and Settings; Models with the count of deployment
// notices not seen yet), the server's status, the page.
import { useQuery } from '@tanstack/react-query'
import { NavLink, Outlet } from 'react-router-dom'
import { api, unwrap } from '../../api/client'
import { NoticeBadge } from '../Models/NoticeBadge'
import { OnboardingTour } from '../Onboarding/OnboardingTour'

const VIEWS = [
  { to: '/training', label: 'Training' },
  { to: '/models', label: 'Models', Badge: NoticeBadge },
  { to: '/datasets', label: 'Datasets' },
  { to: '/playground', label: 'Playground' },
  { to: '/analytics', label: 'Analytics' },
  { to: '/settings', label: 'Settings' },
]

export function Layout() {
  const health = useQuery({
    queryKey: ['health'],
    queryFn: async () => unwrap(await api.GET('/api/health')),
    refetchInterval: 10_000,
  })
  return (
    <div className="flex h-full">
      <nav className="flex w-56 shrink-0 flex-col gap-1 border-r border-ink-700 bg-ink-900 p-4">
        <div className="mb-6 flex items-center gap-2 px-2">
          <span className="led bg-cta shadow-[0_0_10px_#14b8a6]" />
          <span className="text-lg font-bold tracking-[0.2em] text-neutral-100">THINKER</span>
        </div>
        {VIEWS.map((view) => (
          <NavLink
            key={view.to}
            to={view.to}
            data-tour={`nav-${view.label.toLowerCase()}`}
            className={({ isActive }) =>
              `rounded-xl px-3 py-2 text-sm ${
                isActive ? 'bg-ink-700 text-accent' : 'text-neutral-400 hover:text-neutral-100'
              }`
            }
          >
            {view.label}
            {view.Badge && <view.Badge />}
          </NavLink>
        ))}
        <div className="mt-auto px-2 text-xs text-neutral-500">
          {health.data ? (
            <span className="flex items-center gap-2">
              <span className="led bg-ok" /> server {health.data.version} · {health.data.database}
              {health.data.gpus ? ` · ${health.data.gpus} GPU` : ' · CPU'}
            </span>
          ) : health.isError ? (
            <span className="flex items-center gap-2 text-bad">
              <span className="led bg-bad" /> server unreachable
            </span>
          ) : (
            'connecting…'
          )}
        </div>
      </nav>
      <main className="min-w-0 flex-1 overflow-y-auto p-8">
        <Outlet />
      </main>
      <OnboardingTour />
    </div>
  )
}
