// A row of tabs, one selected.
import type { ReactNode } from 'react'

export function Tabs<T extends string>({
  tabs,
  value,
  onChange,
}: {
  tabs: readonly { id: T; label: ReactNode }[]
  value: NoInfer<T>
  onChange: (id: NoInfer<T>) => void
}) {
  return (
    <div role="tablist" className="flex flex-wrap gap-1 rounded-xl border border-ink-700 bg-ink-900 p-1">
      {tabs.map((t) => (
        <button
          key={t.id}
          type="button"
          role="tab"
          aria-selected={t.id === value}
          onClick={() => onChange(t.id)}
          className={`rounded-lg px-3 py-1.5 text-sm transition ${
            t.id === value ? 'bg-ink-700 text-accent' : 'text-neutral-400 hover:text-neutral-100'
          }`}
        >
          {t.label}
        </button>
      ))}
    </div>
  )
}
