// An ⓘ beside a label: its help on hover and on keyboard focus.
import { useId, type ReactNode } from 'react'

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
