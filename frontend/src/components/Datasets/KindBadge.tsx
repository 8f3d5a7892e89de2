// The kind of a dataset, and the algorithms it feeds (as the server's job schemas say): users
// pick data by what it trains.
import { trainedBy } from '../../api/jobConfig'
import type { DatasetKind } from '../../api/vocabulary'
import { KIND_LABEL } from './format'

export function KindBadge({ kind }: { kind: DatasetKind | null | undefined }) {
  if (!kind) return <span className="text-xs text-neutral-500">unknown kind</span>
  return (
    <span className="inline-flex items-center gap-1.5 rounded-full border border-accent/40 bg-accent/10 px-2.5 py-0.5 text-xs text-accent">
      {KIND_LABEL[kind] ?? kind}
      <span className="text-neutral-500">→ {trainedBy(kind).join(' · ') || '?'}</span>
    </span>
  )
}

export function BuiltinBadge() {
  return (
    <span
      title="Shipped example, registered at start-up"
      className="rounded-full border border-ink-600 px-2 py-0.5 text-[10px] uppercase tracking-wider text-neutral-400"
    >
      builtin
    </span>
  )
}
