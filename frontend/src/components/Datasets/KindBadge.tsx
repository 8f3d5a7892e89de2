// The kind of a dataset, and the algorithms it feeds: users pick data by what it trains.
import { KIND_LABEL } from './format'

const TRAINS: Record<string, string> = {
  chat: 'SL',
  prompt_completion: 'SL',
  preferences: 'DPO · RM',
  problems: 'RL',
}

export function KindBadge({ kind }: { kind: string | null | undefined }) {
  if (!kind) return <span className="text-xs text-neutral-500">unknown kind</span>
  return (
    <span className="inline-flex items-center gap-1.5 rounded-full border border-accent/40 bg-accent/10 px-2.5 py-0.5 text-xs text-accent">
      {KIND_LABEL[kind] ?? kind}
      <span className="text-neutral-500">→ {TRAINS[kind] ?? '?'}</span>
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
