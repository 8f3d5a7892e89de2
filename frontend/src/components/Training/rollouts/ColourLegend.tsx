// The token view's colour mode switch and the legend of its scale.
import { gradientOf, MODES, SCALES, type ColourMode } from './colour'

const NAMES: Record<ColourMode, string> = { logprob: 'Logprob', surprisal: 'Surprisal', gap: 'Gap' }

export function ColourLegend({ mode, onChange }: { mode: ColourMode; onChange: (mode: ColourMode) => void }) {
  const scale = SCALES[mode]
  return (
    <div className="flex flex-wrap items-center gap-3">
      <span className="label mb-0">Colour tokens by</span>
      <div role="radiogroup" aria-label="Colour tokens by" className="flex gap-1 rounded-xl border border-ink-700 bg-ink-950 p-1">
        {MODES.map((m) => (
          <button
            key={m}
            type="button"
            role="radio"
            aria-checked={m === mode}
            onClick={() => onChange(m)}
            className={`rounded-lg px-2.5 py-1 text-xs transition ${m === mode ? 'bg-ink-700 text-accent' : 'text-neutral-400 hover:text-neutral-100'}`}
          >
            {NAMES[m]}
          </button>
        ))}
      </div>
      <figure className="flex min-w-64 flex-1 flex-col gap-1" aria-label={`${NAMES[mode]} scale`} data-testid="colour-legend">
        <div className="h-2.5 rounded-full border border-ink-600" style={{ background: gradientOf(mode) }} />
        <div className="flex justify-between font-mono text-[10px] text-neutral-400">
          {scale.ends.map((e) => <span key={e}>{e}</span>)}
        </div>
        <figcaption className="text-[11px] text-neutral-500">{scale.label}</figcaption>
      </figure>
    </div>
  )
}
