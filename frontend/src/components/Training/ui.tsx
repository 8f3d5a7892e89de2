// Small building blocks of the Training view: an info tooltip, a modal, tabs, a warning chip.
import { useEffect, useId, type ReactNode } from 'react'

/** An ⓘ that shows its text on hover and on keyboard focus. */
export function InfoTip({ children, label = 'What does this mean?' }: { children: ReactNode; label?: string }) {
  const id = useId()
  return (
    <span className="group relative inline-flex">
      <button
        type="button"
        aria-label={label}
        aria-describedby={id}
        className="flex h-4 w-4 items-center justify-center rounded-full border border-ink-600 text-[10px] leading-none text-neutral-400 hover:border-accent hover:text-accent focus:border-accent focus:text-accent focus:outline-none"
      >
        i
      </button>
      <span
        id={id}
        role="tooltip"
        className="invisible absolute left-1/2 top-6 z-30 w-72 -translate-x-1/2 rounded-xl border border-ink-600 bg-ink-800/95 p-3 text-left text-xs font-normal normal-case tracking-normal text-neutral-300 opacity-0 shadow-xl backdrop-blur transition group-hover:visible group-hover:opacity-100 group-focus-within:visible group-focus-within:opacity-100"
      >
        {children}
      </span>
    </span>
  )
}

export function Modal({
  title,
  onClose,
  children,
  wide = false,
}: {
  title: string
  onClose: () => void
  children: ReactNode
  wide?: boolean
}) {
  // Escape closes, as in every dialog the user has met before.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && onClose()
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [onClose])
  return (
    <div className="fixed inset-0 z-50 flex items-center justify-center bg-black/70 p-6 backdrop-blur-sm" onClick={onClose}>
      <div
        role="dialog"
        aria-modal="true"
        aria-label={title}
        className={`card max-h-[90vh] w-full overflow-y-auto shadow-2xl ${wide ? 'max-w-4xl' : 'max-w-lg'}`}
        onClick={(e) => e.stopPropagation()}
      >
        <div className="mb-4 flex items-start justify-between gap-4">
          <h2 className="text-lg font-semibold text-neutral-100">{title}</h2>
          <button type="button" className="text-neutral-500 hover:text-neutral-200" aria-label="Close" onClick={onClose}>
            ✕
          </button>
        </div>
        {children}
      </div>
    </div>
  )
}

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

export function Warning({ children }: { children: ReactNode }) {
  return (
    <p role="alert" className="flex items-start gap-2 rounded-lg border border-warn/40 bg-warn/10 px-2 py-1 text-xs text-warn">
      <span aria-hidden>⚠</span>
      <span>{children}</span>
    </p>
  )
}

export function Chip({ children, tone = 'neutral' }: { children: ReactNode; tone?: 'neutral' | 'accent' | 'cta' | 'warn' }) {
  const tones = {
    neutral: 'border-ink-600 text-neutral-300',
    accent: 'border-accent/40 text-accent',
    cta: 'border-cta/40 text-cta',
    warn: 'border-warn/60 text-warn',
  }
  return <span className={`rounded-full border px-2 py-0.5 text-xs ${tones[tone]}`}>{children}</span>
}
