// The inspector's filters, each with how many groups (or completions) it would show.
import { FILTERS, filterCount, type RolloutFilter } from './filters'
import type { RolloutGroup } from './types'

export function FilterBar({ groups, value, onChange }: { groups: readonly RolloutGroup[]; value: RolloutFilter; onChange: (f: RolloutFilter) => void }) {
  return (
    <div role="radiogroup" aria-label="Filter rollouts" className="flex flex-wrap gap-1 rounded-xl border border-ink-700 bg-ink-950 p-1">
      {FILTERS.map((f) => (
        <button
          key={f.id}
          type="button"
          role="radio"
          aria-checked={f.id === value}
          title={f.title}
          onClick={() => onChange(f.id)}
          className={`rounded-lg px-2.5 py-1 text-xs transition ${f.id === value ? 'bg-ink-700 text-accent' : 'text-neutral-400 hover:text-neutral-100'}`}
        >
          {f.label} <span className="font-mono text-neutral-500">{filterCount(groups, f.id)}</span>
        </button>
      ))}
    </div>
  )
}
