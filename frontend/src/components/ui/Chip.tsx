// A chip: a small tag, in a tone.
import type { ReactNode } from 'react'

export function Chip({ children, tone = 'neutral' }: { children: ReactNode; tone?: 'neutral' | 'accent' | 'cta' | 'warn' | 'ok' | 'bad' }) {
  const tones = {
    neutral: 'border-ink-600 text-neutral-300',
    accent: 'border-accent/40 text-accent',
    cta: 'border-cta/40 text-cta',
    warn: 'border-warn/60 text-warn',
    ok: 'border-ok/50 text-ok',
    bad: 'border-bad/60 text-bad',
  }
  return <span className={`rounded-full border px-2 py-0.5 text-xs ${tones[tone]}`}>{children}</span>
}
