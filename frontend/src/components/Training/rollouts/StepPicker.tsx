// The step whose rollouts are shown: previous / next, a list, and "Latest", which follows new
// steps while the job runs.
export function StepPicker({ steps, shown, live, following, onPick }: {
  steps: readonly number[]
  shown: number
  live: boolean
  following: boolean
  onPick: (step: number | null) => void
}) {
  const idx = steps.indexOf(shown)
  return (
    <div className="flex flex-wrap items-center gap-3">
      <span className="label mb-0">Step</span>
      <button type="button" className="btn-ghost px-2 py-1" disabled={idx <= 0} onClick={() => onPick(steps[idx - 1])} aria-label="Previous step">←</button>
      <select aria-label="Rollout step" className="input w-28" value={shown} onChange={(e) => onPick(Number(e.target.value))}>
        {steps.map((s) => <option key={s} value={s}>{s}</option>)}
      </select>
      <button type="button" className="btn-ghost px-2 py-1" disabled={idx >= steps.length - 1} onClick={() => onPick(steps[idx + 1])} aria-label="Next step">→</button>
      <button
        type="button"
        aria-pressed={following}
        className={`btn-ghost px-2 py-1 text-xs ${following ? 'border-accent text-accent' : ''}`}
        onClick={() => onPick(null)}
      >
        Latest{live ? ' (follows)' : ''}
      </button>
    </div>
  )
}
