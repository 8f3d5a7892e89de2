// What the server runs with: GET /api/settings (no secrets) and GET /api/health.
import type { Schemas } from '../../api/client'

interface Props {
  settings: Schemas['SettingsPublic']
  health?: Schemas['HealthPublic']
}

export function ServerInfoCard({ settings, health }: Props) {
  const rows: [string, string][] = [
    ['Version', health ? health.version : '…'],
    ['Status', health ? health.status : '…'],
    ['Address', `${settings.host}:${settings.port}`],
    ['Database', settings.database],
    ['Data directory', settings.data_dir],
    ['GPUs', health ? (health.gpus ? String(health.gpus) : 'none (CPU jobs)') : '…'],
    ['Jobs', health ? `${health.running_jobs} running · ${health.queued_jobs} queued` : '…'],
    ['Auth', settings.auth_required ? 'tokens required' : 'open on loopback'],
    ['Job slots', `${settings.max_cpu_jobs} CPU · ${settings.max_remote_jobs} Tinker`],
    ['Model pool', `${settings.model_pool_size} loaded models`],
    ['Max upload', `${settings.max_upload_mb} MiB`],
    ['CORS origins', settings.cors_origins.join(', ') || 'none'],
  ]
  return (
    <section className="card">
      <h2 className="mb-3 flex items-center gap-2 font-semibold text-neutral-100">
        <span className={`led ${health?.status === 'ok' ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-warn'}`} /> Server
      </h2>
      <dl className="grid grid-cols-[140px_minmax(0,1fr)] gap-x-4 gap-y-2 text-sm">
        {rows.map(([k, v]) => (
          <div key={k} className="contents">
            <dt className="text-neutral-500">{k}</dt>
            <dd className="truncate font-mono text-xs leading-5 text-neutral-200" title={v}>{v}</dd>
          </div>
        ))}
      </dl>
    </section>
  )
}
