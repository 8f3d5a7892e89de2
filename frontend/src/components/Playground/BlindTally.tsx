// The session's blind A/B tally for one pair of models: B's wins, the ties and B's losses, the
// statistics' verdict line (POST /api/evaluations/compare after every choice) and how many
// more decided prompts a reliable answer takes.
import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { errorMessage } from '../../api/client'
import { compareNames, compareOutcomes, countOutcomes, needLine, outcomesFor, useBlind } from './blind'

interface Props {
  a: string
  b: string
  /** The models' short names, as the verdict line says them. */
  modelName: (id: string) => string
}

export function BlindTally({ a, b, modelName }: Props) {
  const tallies = useBlind((s) => s.tallies)
  const reset = useBlind((s) => s.reset)
  const outcomes = outcomesFor(tallies, a, b)
  const names = compareNames(modelName(a), modelName(b))
  const stats = useQuery({
    queryKey: ['ab-compare', names.a, names.b, outcomes],
    queryFn: () => compareOutcomes(names.a, names.b, outcomes),
    enabled: outcomes.length > 0,
    // The last verdict stays up while the next is computed; another pair's never shows.
    placeholderData: keepPreviousData,
    staleTime: Infinity,
  })
  const counts = countOutcomes(outcomes)
  const result = stats.data && stats.data.a === names.a && stats.data.b === names.b ? stats.data : null
  const current = result?.n === outcomes.length
  return (
    <section className="card flex flex-col gap-3" aria-label="Blind tally">
      <div className="flex items-center gap-3">
        <h3 className="text-sm font-semibold text-neutral-100">Blind tally this session</h3>
        <span className="truncate text-xs text-neutral-400">
          <span className="font-mono">{names.a}</span> (A) vs <span className="font-mono">{names.b}</span> (B)
        </span>
        {outcomes.length > 0 && (
          <button className="ml-auto text-xs text-neutral-500 hover:text-neutral-200" onClick={() => reset(a, b)}>Reset tally</button>
        )}
      </div>
      {outcomes.length === 0 ? (
        <p className="text-xs text-neutral-500">
          Judge prompts blind: each choice counts here for B against A, with its significance.
        </p>
      ) : (
        <>
          <div className="grid grid-cols-3 gap-2 text-center" data-testid="tally-counts">
            <Count label="wins" value={counts.wins} note={`B (${names.b}) better`} tone="text-ok" />
            <Count label="ties" value={counts.ties} note="left out of the sign test" tone="text-neutral-300" />
            <Count label="losses" value={counts.losses} note={`A (${names.a}) better`} tone="text-bad" />
          </div>
          {result && (
            <div className={current ? '' : 'opacity-60'}>
              <p className={`text-sm ${result.significant ? 'text-cta' : 'text-neutral-200'}`} data-testid="verdict">{result.verdict}</p>
              <p className="mt-1 text-xs text-neutral-400" data-testid="needed">{needLine(result)}</p>
            </div>
          )}
          {stats.isError && <p role="alert" className="text-xs text-bad">Could not compute the statistics: {errorMessage(stats.error)}</p>}
        </>
      )}
    </section>
  )
}

function Count({ label, value, note, tone }: { label: string; value: number; note: string; tone: string }) {
  return (
    <div className="rounded-xl border border-ink-700 bg-ink-950/60 px-2 py-2" title={note}>
      <div className={`font-mono text-xl ${tone}`}>{value}</div>
      <div className="text-[11px] uppercase tracking-wider text-neutral-500">{label}</div>
      <div className="truncate text-[11px] text-neutral-500">{note}</div>
    </div>
  )
}
