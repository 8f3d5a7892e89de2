// An eval job's evaluation: each model's score (with its bootstrap interval), NLL and finished
// answers; each pair's comparison as a card (the verdict, wins / ties / losses, B's win rate
// with its interval on a 0–100% axis, the sign test's p-value); the job's leaderboard; and the
// prompts, every model's answers side by side (sorted by prompt, by a model's score or by
// disagreement; all, disagreeing or agreeing; a page at a time), with the JSONL download.
// Polled while the job runs (queries.ts, useJobEvaluation); empty until the job has succeeded.
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { isLive } from '../../api/vocabulary'
import { Chip } from '../ui/Chip'
import { Section } from '../ui/Section'
import { Empty, ErrorState, Loading } from '../ui/States'
import { Tabs } from '../ui/Tabs'
import { DownloadLink, Pager, RESULTS_PAGE } from './BatchResults'
import { percent } from './batch'
import {
  answerTones,
  axisPosition,
  evalModelLabels,
  evaluationQuery,
  formatP,
  formatScore,
  intervalText,
  libraryIds,
  outcomeShares,
  ratePercent,
  verdictSide,
  type EvalAnswer,
  type EvalComparison,
  type EvalModelFigures,
  type EvalSampleRow,
  type EvalSummary,
  type SampleFilter,
  type SampleOrder,
  type Tone,
} from './evaluation'
import { useJobEvaluation, type Job } from './queries'

const FILTERS: { id: SampleFilter; label: string }[] = [
  { id: 'all', label: 'All' },
  { id: 'disagree', label: 'Disagree' },
  { id: 'agree', label: 'Agree' },
]
const ORDERS: { id: SampleOrder; label: string }[] = [
  { id: 'index', label: 'Prompt order' },
  { id: 'worst', label: "A model's worst first" },
  { id: 'best', label: "A model's best first" },
  { id: 'spread', label: 'Largest disagreement first' },
]

export function EvaluationPanel({ job }: { job: Job }) {
  const [filter, setFilter] = useState<SampleFilter>('all')
  const [order, setOrder] = useState<SampleOrder>('index')
  const [model, setModel] = useState<string | null>(null)
  const [offset, setOffset] = useState(0)
  const live = isLive(job.state)
  const evaluation = useJobEvaluation(job.id, evaluationQuery(order, model, filter, offset, RESULTS_PAGE), live)
  const data = evaluation.data
  const summary = (data?.summary ?? null) as EvalSummary | null
  return (
    <Section
      title="Evaluation"
      aside={
        <p className="text-xs text-neutral-500">
          Every model answers the same prompts and each answer is scored. A comparison counts, prompt by prompt, whether B (the later
          model) scored higher than A: B's win rate (a tie counts half) with its bootstrap 95% interval, significant when the sign
          test's p-value (ties left out) is below α.
        </p>
      }
    >
      {evaluation.isLoading ? (
        <Loading what="the evaluation" />
      ) : evaluation.isError || !data ? (
        <ErrorState error={evaluation.error} what="the evaluation" />
      ) : !summary ? (
        <Waiting job={job} live={live} />
      ) : (
        <>
          <Facts summary={summary} job={job} />
          <ModelsTable models={summary.models} />
          <div>
            <h3 className="label">Comparisons · {summary.comparisons.length}</h3>
            <div className={`grid gap-3 ${summary.comparisons.length > 1 ? 'xl:grid-cols-2' : ''}`}>
              {summary.comparisons.map((c, i) => <ComparisonCard key={`${c.a}|${c.b}`} comparison={c} index={i} alpha={summary.alpha} />)}
            </div>
          </div>
          {summary.leaderboard.length > 0 && (
            <div>
              <h3 className="label">Leaderboard of this job</h3>
              <RatingsTable
                label="job leaderboard"
                rows={summary.leaderboard.map((r) => ({ ...r, key: r.model, name: r.model, id: libraryIds(summary.models).get(r.model) ?? null }))}
              />
            </div>
          )}
          <div className="flex flex-col gap-3">
            <h3 className="label mb-0">Prompts · every model's answers</h3>
            <div className="flex flex-wrap items-center gap-3">
              <Tabs tabs={FILTERS} value={filter} onChange={(f) => { setFilter(f); setOffset(0) }} />
              <label className="flex items-center gap-2 text-xs text-neutral-400">
                Sort
                <select aria-label="Sort prompts" className="input w-auto py-1.5" value={order} onChange={(e) => { setOrder(e.target.value as SampleOrder); setOffset(0) }}>
                  {ORDERS.map((o) => <option key={o.id} value={o.id}>{o.label}</option>)}
                </select>
              </label>
              {(order === 'worst' || order === 'best') && (
                <label className="flex items-center gap-2 text-xs text-neutral-400">
                  of
                  <select
                    aria-label="Sort by the scores of"
                    className="input w-auto py-1.5"
                    value={model ?? summary.models.at(-1)?.name ?? ''}
                    onChange={(e) => { setModel(e.target.value); setOffset(0) }}
                  >
                    {summary.models.map((m) => <option key={m.name} value={m.name}>{m.name}</option>)}
                  </select>
                </label>
              )}
              <DownloadLink path={`/api/jobs/${job.id}/evaluation/download`} filename={`${job.id}-samples.jsonl`} />
            </div>
            <SamplesTable rows={data.data as unknown as EvalSampleRow[]} models={summary.models} filter={filter} />
            <Pager offset={offset} total={data.total} onChange={setOffset} />
          </div>
        </>
      )}
    </Section>
  )
}

/** Before the summary: which models have answered, or why there is none. */
function Waiting({ job, live }: { job: Job; live: boolean }) {
  const labels = evalModelLabels(job.config)
  return (
    <Empty
      title="No evaluation yet"
      next={
        <div className="flex flex-col gap-2">
          <span>
            {live
              ? `The models answer one after the other (${job.step} of ${job.total_steps ?? labels.length} done); the scores, comparisons and answers appear here once the last one has.`
              : job.state === 'succeeded'
                ? 'This job wrote no evaluation.'
                : 'This job ended before every model had answered: it has no evaluation.'}
          </span>
          {labels.length > 0 && (
            <ol aria-label="models evaluated" className="flex flex-wrap gap-2 text-xs">
              {labels.map((label, i) => (
                <li key={label} className={`rounded-full border px-2 py-0.5 ${i < job.step ? 'border-ok/50 text-ok' : live && i === job.step ? 'border-accent/50 text-accent' : 'border-ink-600 text-neutral-400'}`}>
                  {i < job.step ? '✓ ' : ''}{i === 0 ? 'A ' : ''}{label}
                </li>
              ))}
            </ol>
          )}
        </div>
      }
    />
  )
}

function Facts({ summary, job }: { summary: EvalSummary; job: Job }) {
  return (
    <p className="flex flex-wrap items-center gap-x-3 gap-y-1 text-sm text-neutral-300" data-testid="evaluation-facts">
      <span>
        <b className="font-mono">{summary.prompts}</b> prompts · scored by <code className="text-accent">{summary.scorer}</code> ·{' '}
        {summary.samples} {summary.samples === 1 ? 'answer' : 'answers'} a prompt at temperature {summary.temperature} · α = {summary.alpha}
      </span>
      {job.dataset_id && (
        <Link to={`/models?view=leaderboard&dataset=${encodeURIComponent(job.dataset_id)}`} className="ml-auto text-xs text-accent hover:underline">
          Leaderboard of this eval set →
        </Link>
      )}
    </p>
  )
}

/** A model's name: a link to its page when it is a library model. */
function ModelName({ name, id, title }: { name: string; id: string | null; title?: string }) {
  return id ? (
    <Link to={`/models/${id}`} className="font-medium text-neutral-100 underline decoration-ink-600 underline-offset-4 hover:text-accent hover:decoration-accent" title={title}>{name}</Link>
  ) : (
    <span className="font-mono text-neutral-200" title={title}>{name}</span>
  )
}

function ModelsTable({ models }: { models: EvalModelFigures[] }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label="models">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">Model</th>
            <th className="px-3 py-2">Score <span className="normal-case tracking-normal text-neutral-600">mean [95% interval]</span></th>
            <th className="px-3 py-2">NLL</th>
            <th className="px-3 py-2">Finished answers</th>
            <th className="px-3 py-2">Prompts</th>
          </tr>
        </thead>
        <tbody>
          {models.map((m, i) => (
            <tr key={m.name} data-testid={`model-${i}`} className="border-t border-ink-700">
              <td className="px-3 py-2">
                <span className="flex flex-wrap items-center gap-2">
                  <ModelName name={m.name} id={m.id} title={m.model} />
                  {i === 0 && <Chip>baseline</Chip>}
                </span>
              </td>
              <td className="px-3 py-2 font-mono">
                <span className="text-base text-neutral-100">{formatScore(m.score_mean)}</span>{' '}
                <span className="text-neutral-500">{intervalText(m.score_interval)}</span>
              </td>
              <td className="px-3 py-2 font-mono text-neutral-200" title="mean NLL per token of the reference answers">{formatScore(m.nll_mean)}</td>
              <td className="px-3 py-2 font-mono text-neutral-200" title="answers that ended on their own, not cut by max_tokens">{percent(m.terminated_rate)}</td>
              <td className="px-3 py-2 font-mono text-neutral-400">{m.prompts}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

const SIDE_TONE = { b: 'text-ok', a: 'text-bad', none: 'text-neutral-100' } as const
const SIDE_BORDER = { b: 'border-ok/50', a: 'border-bad/50', none: 'border-ink-700' } as const

function ComparisonCard({ comparison: c, index, alpha }: { comparison: EvalComparison; index: number; alpha: number }) {
  const side = verdictSide(c)
  return (
    <article aria-label={`${c.b} against ${c.a}`} data-testid={`comparison-${index}`} className={`flex flex-col gap-3 rounded-xl border bg-ink-800/60 p-4 ${SIDE_BORDER[side]}`}>
      <div className="flex flex-wrap items-center justify-between gap-2 text-xs text-neutral-400">
        <span>
          <span className="font-mono text-neutral-500">A</span> {c.a} <span className="mx-1 text-neutral-600">vs</span>
          <span className="font-mono text-neutral-500">B</span> {c.b}
        </span>
        {c.significant ? <Chip tone={side === 'a' ? 'bad' : 'ok'}>significant</Chip> : <Chip>not significant</Chip>}
      </div>
      <p data-testid="verdict" className={`text-base font-semibold leading-snug ${SIDE_TONE[side]}`}>{c.verdict}</p>
      <OutcomeBar comparison={c} />
      <WinRateAxis comparison={c} />
      <dl className="flex flex-wrap gap-x-5 gap-y-1 text-xs">
        <div className="flex gap-1.5"><dt className="text-neutral-500">sign test</dt><dd className="font-mono text-neutral-200" data-testid="p-value">{formatP(c.p_value)}</dd></div>
        <div className="flex gap-1.5"><dt className="text-neutral-500">α</dt><dd className="font-mono text-neutral-200">{alpha}</dd></div>
        <div className="flex gap-1.5"><dt className="text-neutral-500">prompts</dt><dd className="font-mono text-neutral-200">{c.n}</dd></div>
      </dl>
    </article>
  )
}

/** B's wins, the ties and B's losses as one bar. */
function OutcomeBar({ comparison: c }: { comparison: EvalComparison }) {
  const share = outcomeShares(c)
  return (
    <div className="flex flex-col gap-1">
      <div className="flex h-2.5 w-full overflow-hidden rounded-full bg-ink-700" role="img" aria-label={`B won ${c.wins}, ${c.ties} ties, B lost ${c.losses}`}>
        <div className="bg-ok" style={{ width: axisPosition(share.wins) }} />
        <div className="bg-neutral-500" style={{ width: axisPosition(share.ties) }} />
        <div className="bg-bad" style={{ width: axisPosition(share.losses) }} />
      </div>
      <div className="flex justify-between text-xs" data-testid="outcomes">
        <span className="text-ok">B won {c.wins}</span>
        <span className="text-neutral-400">{c.ties} {c.ties === 1 ? 'tie' : 'ties'}</span>
        <span className="text-bad">B lost {c.losses}</span>
      </div>
    </div>
  )
}

/** B's win rate and its interval on a 0–100% axis, with the 50% (no difference) line. */
function WinRateAxis({ comparison: c }: { comparison: EvalComparison }) {
  const [low, high] = c.interval ?? [c.win_rate ?? 0, c.win_rate ?? 0]
  return (
    <div className="flex flex-col gap-1">
      <span className="text-xs text-neutral-400">
        B's win rate <b className="font-mono text-neutral-100" data-testid="win-rate">{ratePercent(c.win_rate)}</b>{' '}
        <span className="font-mono text-neutral-500">{c.interval ? `[${ratePercent(low)}, ${ratePercent(high)}]` : ''}</span>
      </span>
      <div className="relative h-5" role="img" aria-label={`B's win rate ${ratePercent(c.win_rate)}, 95% interval ${ratePercent(low)} to ${ratePercent(high)}`}>
        <div className="absolute inset-x-0 top-1/2 h-px bg-ink-600" />
        <div className="absolute inset-y-0 left-1/2 w-px border-l border-dashed border-neutral-500" title="50%: no difference" />
        <div
          data-testid="interval-band"
          className="absolute top-1/2 h-2 min-w-[2px] -translate-y-1/2 rounded-full bg-accent/40"
          style={{ left: axisPosition(low), width: axisPosition(high - low) }}
        />
        {c.win_rate !== null && (
          <div className="absolute top-1/2 h-3 w-3 -translate-x-1/2 -translate-y-1/2 rounded-full bg-accent shadow-[0_0_8px_#0ea5e9]" style={{ left: axisPosition(c.win_rate) }} />
        )}
      </div>
      <div className="flex justify-between font-mono text-[10px] text-neutral-600" aria-hidden>
        <span>0%</span><span>50%</span><span>100%</span>
      </div>
    </div>
  )
}

/** A leaderboard's row: a model's rank, rating and record. */
export interface RatingRow {
  key: string
  rank: number
  name: string
  id: string | null
  rating: number | null
  wins: number
  games: number
  score_mean?: number | null
  job_id?: string
}

/** A Bradley-Terry leaderboard (Elo scale); `best` marks the first row as the best model. */
export function RatingsTable({ label, rows, best = false, jobs = false }: { label: string; rows: RatingRow[]; best?: boolean; jobs?: boolean }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label={label}>
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="w-14 px-3 py-2">Rank</th>
            <th className="px-3 py-2">Model</th>
            <th className="px-3 py-2" title="Elo scale: 1000 is the geometric mean; 400 points are 10:1 odds">Rating</th>
            <th className="px-3 py-2">Wins / games</th>
            {jobs && <th className="px-3 py-2">Latest score</th>}
            {jobs && <th className="px-3 py-2">Latest eval job</th>}
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={r.key} data-testid={`rank-${r.rank}`} className={`border-t border-ink-700 ${best && i === 0 ? 'bg-ok/5' : ''}`}>
              <td className="px-3 py-2 font-mono text-lg text-neutral-300">{r.rank}</td>
              <td className="px-3 py-2">
                <span className="flex flex-wrap items-center gap-2">
                  <ModelName name={r.name} id={r.id} />
                  {best && i === 0 && <Chip tone="ok">★ best for this eval set</Chip>}
                </span>
              </td>
              <td className="px-3 py-2 font-mono text-neutral-100">{typeof r.rating === 'number' ? Math.round(r.rating) : '—'}</td>
              <td className="px-3 py-2 font-mono text-neutral-300">{Number.isInteger(r.wins) ? r.wins : r.wins.toFixed(1)} / {r.games}</td>
              {jobs && <td className="px-3 py-2 font-mono text-neutral-300">{formatScore(r.score_mean)}</td>}
              {jobs && (
                <td className="px-3 py-2 font-mono">
                  {r.job_id ? <Link to={`/training/${r.job_id}`} className="text-neutral-300 hover:text-accent">{r.job_id}</Link> : '—'}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

const CLIP = 240
const TONE_CELL: Record<Exclude<Tone, null>, string> = {
  best: 'bg-ok/10 shadow-[inset_3px_0_0_0_rgba(34,197,94,0.8)]',
  worst: 'bg-bad/5 shadow-[inset_3px_0_0_0_rgba(239,68,68,0.6)]',
}

/** A long text, clipped until expanded. */
function Clipped({ text }: { text: string }) {
  const [open, setOpen] = useState(false)
  const long = text.length > CLIP
  return (
    <span className="flex flex-col gap-1">
      <span className="whitespace-pre-wrap break-words font-mono text-neutral-200">
        {text === '' ? <i className="text-neutral-600">(empty)</i> : open || !long ? text : `${text.slice(0, CLIP)}…`}
      </span>
      {long && (
        <button type="button" aria-expanded={open} className="self-start text-accent hover:underline" onClick={() => setOpen(!open)}>
          {open ? 'less' : 'more'}
        </button>
      )}
    </span>
  )
}

/** One model's answers to a prompt, with their scores. */
function AnswerCell({ answer, tone }: { answer: EvalAnswer | undefined; tone: Tone }) {
  if (!answer) return <td className="px-3 py-2 text-neutral-600">—</td>
  const texts = answer.answers ?? []
  return (
    <td data-tone={tone ?? 'same'} className={`max-w-md px-3 py-2 align-top ${tone ? TONE_CELL[tone] : ''}`}>
      <div className="flex flex-col gap-2">
        <span className="flex flex-wrap items-center gap-2">
          <span className={`font-mono text-sm ${tone === 'best' ? 'text-ok' : tone === 'worst' ? 'text-bad' : 'text-neutral-100'}`} data-testid="score">
            {formatScore(answer.score)}
          </span>
          {answer.nll !== null && <span className="text-neutral-500">NLL {formatScore(answer.nll)}</span>}
          {answer.terminated?.some((t) => !t) && <span title="An answer hit max_tokens before it ended."><Chip>cut off</Chip></span>}
        </span>
        {texts.map((text, i) => (
          <div key={i} className="flex flex-col gap-1">
            <div className="flex gap-2">
              {texts.length > 1 && <span className="shrink-0 font-mono text-neutral-500">{formatScore(answer.scores?.[i])}</span>}
              <Clipped text={text} />
            </div>
            {answer.judge_replies?.[i] !== undefined && (
              // a model as judge: the reply its grade was read from (none found: scored 0)
              <span className="text-xs text-neutral-500" data-testid="judge-reply">
                judge: <span className="font-mono text-neutral-400">{answer.judge_replies[i]}</span>
              </span>
            )}
          </div>
        ))}
      </div>
    </td>
  )
}

function SamplesTable({ rows, models, filter }: { rows: EvalSampleRow[]; models: EvalModelFigures[]; filter: SampleFilter }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label="prompts">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">Prompt · reference</th>
            {models.map((m, i) => (
              <th key={m.name} className="px-3 py-2 normal-case tracking-normal">
                <span className="font-mono text-neutral-500">{i === 0 ? 'A' : `B${models.length > 2 ? i : ''}`}</span> <span className="text-neutral-300">{m.name}</span>
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && (
            <tr><td colSpan={models.length + 1} className="px-3 py-4 text-neutral-500">{filter === 'agree' ? 'The models disagree on every prompt.' : filter === 'disagree' ? 'The models agree on every prompt.' : 'No prompt.'}</td></tr>
          )}
          {rows.map((row) => {
            const tones = answerTones(row)
            return (
              <tr key={row.index} data-testid={`sample-${row.index}`} className="border-t border-ink-700 align-top">
                <td className="max-w-sm px-3 py-2">
                  <span className="font-mono text-neutral-500">#{row.index}</span>
                  {row.disagree && <span className="ml-2"><Chip tone="warn">disagree</Chip></span>}
                  <div className="mt-1"><Clipped text={row.prompt} /></div>
                  {row.reference !== null && (
                    <div className="mt-1 text-neutral-500">reference <code className="whitespace-pre-wrap break-words text-cta">{row.reference}</code></div>
                  )}
                </td>
                {models.map((m) => (
                  <AnswerCell key={m.name} answer={row.answers.find((a) => a.model === m.name)} tone={tones[row.answers.findIndex((a) => a.model === m.name)] ?? null} />
                ))}
              </tr>
            )
          })}
        </tbody>
      </table>
    </div>
  )
}
