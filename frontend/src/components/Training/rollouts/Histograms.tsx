// The step's histograms: reward and length per completion, and the mean sampler-vs-trainer gap
// per trained episode. Plain bars (each labelled with its range and count for screen readers
// and tests), the same for every job size.
import { formatValue } from '../../../lib/metrics'
import { histogram, mean, type StepNumbers } from './stats'

const range = (lo: number, hi: number) => (lo === hi ? formatValue(lo) : `${formatValue(lo)} to ${formatValue(hi)}`)

export function Histogram({ title, values, note, bar }: { title: string; values: readonly number[]; note: string; bar: string }) {
  const bins = histogram(values)
  const top = Math.max(1, ...bins.map((b) => b.count))
  return (
    <figure className="card flex min-w-0 flex-col gap-2 p-4" aria-label={title}>
      <figcaption>
        <h4 className="text-sm font-medium text-neutral-200">{title}</h4>
        <p className="text-xs text-neutral-500">
          {values.length ? `n ${values.length} · mean ${formatValue(mean(values))} · ` : ''}
          {note}
        </p>
      </figcaption>
      {bins.length === 0 ? (
        <p className="flex h-28 items-center text-xs text-neutral-600">No values this step.</p>
      ) : (
        <>
          <ul className="flex h-28 items-end gap-0.5 border-b border-ink-600">
            {bins.map((b) => (
              <li
                key={b.lo}
                aria-label={`${range(b.lo, b.hi)}: ${b.count}`}
                title={`${range(b.lo, b.hi)}: ${b.count}`}
                className="flex h-full flex-1 items-end"
              >
                <span className={`w-full rounded-t ${bar}`} style={{ height: `${(b.count / top) * 100}%` }} />
              </li>
            ))}
          </ul>
          <div className="flex justify-between font-mono text-[10px] text-neutral-500">
            <span>{formatValue(bins[0].lo)}</span>
            <span>{formatValue(bins[bins.length - 1].hi)}</span>
          </div>
        </>
      )}
    </figure>
  )
}

export function StepHistograms({ numbers }: { numbers: StepNumbers }) {
  const hasGap = numbers.gaps.length > 0
  return (
    <div className={`grid gap-4 ${hasGap ? 'lg:grid-cols-3' : 'lg:grid-cols-2'}`}>
      <Histogram title="Reward" values={numbers.rewards} bar="bg-cta" note="one bar: every completion scored alike, no signal." />
      <Histogram
        title={`Length (${numbers.lengthUnit})`}
        values={numbers.lengths}
        bar="bg-accent"
        note={numbers.lengthUnit === 'tokens' ? 'tokens the policy sampled, all turns.' : 'this run recorded no tokens.'}
      />
      {hasGap && (
        <Histogram
          title="Sampler − trainer gap"
          values={numbers.gaps}
          bar="bg-warn"
          note="mean log q − log p per trained episode; near 0 is on-policy."
        />
      )}
    </div>
  )
}
