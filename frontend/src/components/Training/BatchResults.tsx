// A batch job's results: the counts, each input's output with its confidence (flagged, applied,
// for a fix whether its tests passed, or the error of a failed shard), a page at a time,
// flagged or not, by input or by confidence; the JSONL download; the pool's actors. Polled
// while the job runs (queries.ts, useJobResults). Its pager and download link serve the
// evaluation panel too.
import { useState } from 'react'
import { errorMessage } from '../../api/client'
import { isLive } from '../../api/vocabulary'
import { downloadFile } from '../Datasets/http'
import { Chip } from '../ui/Chip'
import { Section } from '../ui/Section'
import { Empty, ErrorState, Loading } from '../ui/States'
import { Tabs } from '../ui/Tabs'
import { agreement, batchSetting, latestMetric, percent, type BatchResults, type BatchRow, type PoolActor } from './batch'
import { useJobMetrics, useJobResults, type Job, type ResultsQuery } from './queries'

export const RESULTS_PAGE = 50

type Filter = 'all' | 'flagged' | 'not_flagged'
type Order = NonNullable<ResultsQuery['order']>

const FILTERS: { id: Filter; label: string }[] = [
  { id: 'all', label: 'All' },
  { id: 'flagged', label: 'Flagged' },
  { id: 'not_flagged', label: 'Not flagged' },
]
const ORDERS: { id: Order; label: string }[] = [
  { id: 'index', label: 'Input order' },
  { id: 'confidence', label: 'Least confident first' },
  { id: '-confidence', label: 'Most confident first' },
]
const FLAGGED: Record<Filter, Pick<ResultsQuery, 'flagged'>> = { all: {}, flagged: { flagged: true }, not_flagged: { flagged: false } }

export function BatchResultsPanel({ job }: { job: Job }) {
  const [filter, setFilter] = useState<Filter>('all')
  const [order, setOrder] = useState<Order>('index')
  const [offset, setOffset] = useState(0)
  const live = isLive(job.state)
  const results = useJobResults(job.id, { ...FLAGGED[filter], order, offset, limit: RESULTS_PAGE }, live)
  const metrics = useJobMetrics(job.id)
  const rows = metrics.data?.data ?? []
  const threshold = Number(batchSetting(job, 'confidence_threshold'))
  const data = results.data
  const done = data ? (data.counts.answered ?? 0) + (data.counts.failed ?? 0) : 0
  return (
    <Section
      title="Results"
      aside={
        <p className="text-xs text-neutral-500">
          Each input is answered {String(batchSetting(job, 'samples'))} times; an output's confidence is the share of those samples
          that agree with it. Below {percent(threshold)} it is flagged and not applied.
        </p>
      }
    >
      {results.isLoading ? (
        <Loading what="the results" />
      ) : results.isError || !data ? (
        <ErrorState error={results.error} what="the results" />
      ) : (
        <>
          <Counts counts={data.counts} inputsTotal={latestMetric(rows, 'inputs_total')} meanConfidence={latestMetric(rows, 'mean_confidence')} fix={batchSetting(job, 'task') === 'fix'} />
          {done === 0 ? (
            <Empty
              title="No results yet"
              next={live ? 'Each shard\'s answers appear here as soon as an actor finishes it.' : 'This job answered no input.'}
            />
          ) : (
            <>
              <div className="flex flex-wrap items-center gap-3">
                <Tabs tabs={FILTERS} value={filter} onChange={(f) => { setFilter(f); setOffset(0) }} />
                <label className="flex items-center gap-2 text-xs text-neutral-400">
                  Sort
                  <select aria-label="Sort results" className="input w-auto py-1.5" value={order} onChange={(e) => { setOrder(e.target.value as Order); setOffset(0) }}>
                    {ORDERS.map((o) => <option key={o.id} value={o.id}>{o.label}</option>)}
                  </select>
                </label>
                <DownloadLink path={`/api/jobs/${job.id}/results/download`} filename={`${job.id}-results.jsonl`} />
              </div>
              <RowsTable rows={data.data as unknown as BatchRow[]} filter={filter} />
              <Pager offset={offset} total={data.total} onChange={setOffset} />
            </>
          )}
          <Pool actors={data.actors as unknown as PoolActor[]} live={live} />
        </>
      )}
    </Section>
  )
}

function Count({ id, label, value, detail, tone = 'text-neutral-100' }: { id: string; label: string; value: string; detail?: string; tone?: string }) {
  return (
    <div className="rounded-xl border border-ink-700 bg-ink-800/60 px-3 py-2">
      <dt className="text-xs uppercase tracking-wider text-neutral-500">{label}</dt>
      <dd data-testid={`count-${id}`} className={`font-mono text-xl font-semibold ${tone}`}>{value}</dd>
      {detail && <dd className="text-xs text-neutral-500">{detail}</dd>}
    </div>
  )
}

function Counts({ counts, inputsTotal, meanConfidence, fix }: { counts: BatchResults['counts']; inputsTotal: number | null; meanConfidence: number | null; fix: boolean }) {
  const n = (key: string) => counts[key] ?? 0
  const verifiedAny = fix || n('verified') + n('verification_failed') > 0
  return (
    <dl aria-label="counts" className="grid grid-cols-2 gap-3 sm:grid-cols-3 lg:grid-cols-6">
      <Count id="answered" label="Answered" value={String(n('answered'))} detail={inputsTotal !== null ? `of ${inputsTotal} inputs` : undefined} />
      <Count id="failed" label="Failed" value={String(n('failed'))} tone={n('failed') ? 'text-bad' : undefined} detail="shards failed on every try" />
      <Count id="flagged" label="Flagged" value={String(n('flagged'))} tone={n('flagged') ? 'text-warn' : undefined} detail="below the threshold" />
      <Count id="applied" label="Applied" value={String(n('applied'))} tone="text-ok" detail="confident (and verified)" />
      {verifiedAny && (
        <Count id="verified" label="Verified" value={String(n('verified'))} tone="text-ok" detail={`${n('verification_failed')} failed their tests`} />
      )}
      <Count id="mean_confidence" label="Mean confidence" value={percent(meanConfidence)} tone="text-accent" detail="over the answered inputs" />
    </dl>
  )
}

/** A job's JSONL file (a batch job's results, an eval job's samples). */
export function DownloadLink({ path, filename }: { path: string; filename: string }) {
  const [error, setError] = useState<string | null>(null)
  // A plain link would not carry the API token: the file is fetched with it, then saved.
  const download = (e: React.MouseEvent) => {
    e.preventDefault()
    downloadFile(path, filename).then(() => setError(null), (err: unknown) => setError(errorMessage(err)))
  }
  return (
    <span className="ml-auto flex items-center gap-2">
      {error && <span role="alert" className="text-xs text-bad">{error}</span>}
      <a href={path} download className="btn-ghost" onClick={download}>Download JSONL</a>
    </span>
  )
}

function ConfidenceBar({ row }: { row: BatchRow }) {
  const value = row.confidence ?? 0
  return (
    <div className="flex items-center gap-2" title={agreement(row)}>
      <div className="h-1.5 w-20 rounded-full bg-ink-700" aria-hidden>
        <div className={`h-1.5 rounded-full ${row.flagged ? 'bg-warn' : 'bg-ok'}`} style={{ width: percent(value) }} />
      </div>
      <span className="font-mono text-neutral-200">{percent(value)}</span>
    </div>
  )
}

function StateChips({ row }: { row: BatchRow }) {
  if (row.error !== undefined) return <Chip tone="bad">failed</Chip>
  return (
    <span className="flex flex-wrap gap-1">
      {row.flagged && <Chip tone="warn">flagged</Chip>}
      {row.apply ? <Chip tone="ok">apply</Chip> : !row.flagged && <Chip>not applied</Chip>}
      {row.verified === true && <Chip tone="ok">tests passed</Chip>}
      {row.verified === false && <span title={row.verification}><Chip tone="bad">tests failed</Chip></span>}
      {row.verified === null && <Chip>no tests</Chip>}
      {row.terminated === false && <span title="The answer hit max_tokens before it ended."><Chip>cut off</Chip></span>}
    </span>
  )
}

const CLIP = 200

/** The output, clipped to its first lines until expanded; expanded, the reference and the
 * verification too. */
function Output({ row }: { row: BatchRow }) {
  const [open, setOpen] = useState(false)
  if (row.error !== undefined) return <span className="whitespace-pre-wrap text-bad">{row.error}</span>
  const text = row.output ?? ''
  const lines = text.split('\n')
  const long = text.length > CLIP || lines.length > 3
  const extra = row.reference !== undefined || row.verification !== undefined
  const shown = open || !long ? text : `${lines.slice(0, 3).join('\n').slice(0, CLIP)}…`
  return (
    <div className="flex flex-col gap-1">
      <span className="whitespace-pre-wrap break-words font-mono text-neutral-200">{shown || <i className="text-neutral-600">(empty)</i>}</span>
      {open && row.reference !== undefined && (
        <span className="text-neutral-500">reference <code className="whitespace-pre-wrap text-cta">{row.reference}</code></span>
      )}
      {open && row.verification && (
        <span className={row.verified === false ? 'text-bad' : 'text-neutral-400'}>{row.verification}</span>
      )}
      {(long || extra) && (
        <button type="button" aria-expanded={open} className="self-start text-accent hover:underline" onClick={() => setOpen(!open)}>
          {open ? 'less' : 'more'}
        </button>
      )}
    </div>
  )
}

function RowsTable({ rows, filter }: { rows: BatchRow[]; filter: Filter }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label="results">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">Input</th>
            <th className="px-3 py-2">Output</th>
            <th className="px-3 py-2">Confidence</th>
            <th className="px-3 py-2">State</th>
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && (
            <tr><td colSpan={4} className="px-3 py-4 text-neutral-500">No {filter === 'flagged' ? 'flagged' : 'unflagged'} output yet.</td></tr>
          )}
          {rows.map((row) => (
            <tr key={row.index} data-testid={`result-${row.index}`} className="border-t border-ink-700 align-top">
              <td className="px-3 py-2">
                {row.path && <span className="block break-all font-mono text-neutral-300">{row.path}</span>}
                <span className="font-mono text-neutral-500">#{row.index}</span>
              </td>
              <td className="max-w-xl px-3 py-2"><Output row={row} /></td>
              <td className="px-3 py-2">{row.error === undefined && <ConfidenceBar row={row} />}</td>
              <td className="px-3 py-2"><StateChips row={row} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

export function Pager({ offset, total, onChange }: { offset: number; total: number; onChange: (offset: number) => void }) {
  if (total <= RESULTS_PAGE && offset === 0) return null
  return (
    <div className="flex items-center justify-end gap-3 text-xs text-neutral-400">
      <span data-testid="results-range">
        {total === 0 ? 0 : offset + 1}–{Math.min(offset + RESULTS_PAGE, total)} of {total}
      </span>
      <button type="button" className="btn-ghost px-2 py-1" disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - RESULTS_PAGE))}>← Previous</button>
      <button type="button" className="btn-ghost px-2 py-1" disabled={offset + RESULTS_PAGE >= total} onClick={() => onChange(offset + RESULTS_PAGE)}>Next →</button>
    </div>
  )
}

const ACTOR_LED: Record<string, string> = {
  starting: 'bg-accent animate-pulse',
  busy: 'bg-accent shadow-[0_0_10px_#0ea5e9] animate-pulse',
  idle: 'bg-neutral-400',
  lost: 'bg-bad shadow-[0_0_8px_#ef4444]',
  stopped: 'bg-neutral-600',
}

function Pool({ actors, live }: { actors: PoolActor[]; live: boolean }) {
  if (!actors.length) return live ? <p className="text-xs text-neutral-500">The pool of actors starts with the job's first attempt.</p> : null
  return (
    <div>
      <h3 className="label">Pool · {actors.length} {actors.length === 1 ? 'actor' : 'actors'}</h3>
      <ul aria-label="pool" className="grid gap-2 sm:grid-cols-2 lg:grid-cols-3">
        {actors.map((a) => (
          <li key={a.id} data-testid={`actor-${a.id}`} className={`rounded-xl border px-3 py-2 text-xs ${a.state === 'lost' ? 'border-bad/50' : 'border-ink-700'} bg-ink-800/60`}>
            <div className="flex items-center justify-between gap-2">
              <span className="font-mono text-neutral-200">actor {a.id}</span>
              <span className="inline-flex items-center gap-2 uppercase tracking-wider text-neutral-300">
                <span className={`led ${ACTOR_LED[a.state] ?? 'bg-neutral-500'}`} aria-hidden />
                {a.state}
              </span>
            </div>
            <p className="mt-1 text-neutral-400">
              {a.node ?? 'this machine'}
              {a.pid !== null && ` · pid ${a.pid}`} · {a.shards_done} {a.shards_done === 1 ? 'shard' : 'shards'} done
              {a.shard !== null && a.state === 'busy' && ` · on shard ${a.shard}`}
            </p>
            {a.lost_reason && <p className="mt-1 whitespace-pre-wrap text-bad">{a.lost_reason}</p>}
          </li>
        ))}
      </ul>
    </div>
  )
}
