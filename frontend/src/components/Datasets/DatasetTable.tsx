// The dataset list: one row per stored version, newest first, each a link to its page.
import { Link } from 'react-router-dom'
import { formatBytes, formatDate } from './format'
import { BuiltinBadge, KindBadge } from './KindBadge'
import type { Dataset } from './queries'

export function DatasetTable({ datasets }: { datasets: Dataset[] }) {
  return (
    <div className="card overflow-x-auto p-0">
      <table className="w-full text-left text-sm">
        <thead className="text-xs uppercase tracking-wider text-neutral-500">
          <tr className="border-b border-ink-700">
            <th className="px-5 py-3">name</th>
            <th className="px-3 py-3">kind</th>
            <th className="px-3 py-3 text-right">rows</th>
            <th className="px-3 py-3 text-right">size</th>
            <th className="px-3 py-3">version</th>
            <th className="px-5 py-3">created</th>
          </tr>
        </thead>
        <tbody>
          {datasets.map((d) => (
            <tr key={d.id} className="border-b border-ink-700/60 last:border-0 hover:bg-ink-800/60">
              <td className="px-5 py-3">
                <div className="flex items-center gap-2">
                  <Link to={`/datasets/${d.id}`} className="font-medium text-neutral-100 hover:text-accent">
                    {d.name}
                  </Link>
                  {d.builtin && <BuiltinBadge />}
                </div>
                <div className="font-mono text-xs text-neutral-500">{d.id}</div>
              </td>
              <td className="px-3 py-3"><KindBadge kind={d.kind} /></td>
              <td className="px-3 py-3 text-right font-mono">{d.num_rows.toLocaleString()}</td>
              <td className="px-3 py-3 text-right font-mono text-neutral-400">{formatBytes(d.size_bytes)}</td>
              <td className="px-3 py-3 font-mono">v{d.version}</td>
              <td className="px-5 py-3 text-neutral-400">{formatDate(d.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
