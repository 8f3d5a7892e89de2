// A deployment's history as a timeline of notifications, newest first: promoted (green: the
// gate's verdict line, the previous model → the new one), refused (amber: the verdict, the
// candidate left unserved), failed (red) and skipped (grey) with what happened, and the
// cycle's steps (learning, gating) with their jobs. And the cycle in flight, its jobs' states.
import { Link } from 'react-router-dom'
import { formatDate } from '../Datasets/format'
import { StatusLed } from '../ui/Status'
import { useJob } from '../Training/queries'
import { agoWords, cycleLine, timeline, type DeploymentCycle, type DeploymentEvent, type Tone } from './deployments'

const TONE_CARD: Record<Tone, { card: string; title: string; led: string }> = {
  ok: { card: 'border-ok bg-ok/5', title: 'text-ok', led: 'bg-ok shadow-[0_0_8px_#22c55e]' },
  warn: { card: 'border-warn bg-warn/5', title: 'text-warn', led: 'bg-warn' },
  bad: { card: 'border-bad bg-bad/10', title: 'text-bad', led: 'bg-bad shadow-[0_0_8px_#ef4444]' },
  neutral: { card: 'border-neutral-600 bg-ink-950/60', title: 'text-neutral-400', led: 'bg-neutral-500' },
  accent: { card: 'border-accent/60 bg-accent/5', title: 'text-accent', led: 'bg-accent' },
}

interface Props {
  history: DeploymentEvent[]
  /** A model's name for its id (the library's), else the id. */
  modelName: (id: string) => string
  /** Epoch seconds. */
  now: number
}

export function DeploymentTimeline({ history, modelName, now }: Props) {
  const items = timeline(history)
  if (items.length === 0) {
    return (
      <p className="text-sm text-neutral-500">
        Nothing yet. Each cycle (scheduled, or Run cycle now) and each model put to the gate adds a notification here: promoted, refused,
        skipped or failed.
      </p>
    )
  }
  return (
    <ol aria-label="history" className="flex flex-col gap-2">
      {items.map((e) => {
        const look = TONE_CARD[e.tone]
        return (
          <li key={e.key} data-testid={`event-${e.event}`} data-tone={e.tone} className={`rounded-xl border-l-4 px-4 py-3 ${look.card}`}>
            <div className="flex flex-wrap items-center gap-x-3 gap-y-1">
              <span className={`led ${look.led}`} aria-hidden />
              <span className={`text-sm font-semibold ${look.title}`}>{e.title}</span>
              <span className="ml-auto text-xs text-neutral-500" title={formatDate(e.at)}>{agoWords(e.at, now)} · {formatDate(e.at)}</span>
            </div>
            <p className="mt-1 break-words text-sm text-neutral-200" data-testid="event-detail">{e.detail}</p>
            {(e.event === 'promoted' || e.event === 'refused') && e.candidate && (
              <p className="mt-1 text-xs text-neutral-400" data-testid="event-models">
                {e.event === 'promoted' ? (
                  <>
                    {e.previous && <><ModelLink id={e.previous} name={modelName} /> → </>}
                    <ModelLink id={e.candidate} name={modelName} /> now served
                  </>
                ) : (
                  <><ModelLink id={e.candidate} name={modelName} /> not served; the served model stays</>
                )}
              </p>
            )}
            {e.jobs.length > 0 && (
              <p className="mt-1 flex flex-wrap gap-3 text-xs">
                {e.jobs.map((j) => (
                  <Link key={j} to={`/training/${j}`} className="font-mono text-accent hover:underline">{j} →</Link>
                ))}
              </p>
            )}
          </li>
        )
      })}
    </ol>
  )
}

function ModelLink({ id, name }: { id: string; name: (id: string) => string }) {
  return <Link to={`/models/${id}`} className="font-mono text-neutral-200 hover:text-accent">{name(id)}</Link>
}

/** The cycle in flight: its stage, its jobs with their states, the data and the candidate. */
export function CycleStatus({ cycle, modelName, now }: { cycle: DeploymentCycle; modelName: (id: string) => string; now: number }) {
  return (
    <section role="status" aria-label="Cycle in flight" className="card flex flex-col gap-2 border-accent/40">
      <div className="flex flex-wrap items-center gap-3">
        <span className="led animate-pulse bg-accent shadow-[0_0_10px_#0ea5e9]" aria-hidden />
        <span className="text-sm font-semibold text-neutral-100">{cycleLine(cycle)}</span>
        {cycle.began_at !== undefined && <span className="ml-auto text-xs text-neutral-500">began {agoWords(cycle.began_at, now)}</span>}
      </div>
      <dl className="grid gap-x-4 gap-y-1 text-xs md:grid-cols-[8rem_1fr]">
        {cycle.learn_job_id && (<><dt className="text-neutral-500">learn job</dt><dd><JobChip id={cycle.learn_job_id} /></dd></>)}
        {cycle.eval_job_id && (<><dt className="text-neutral-500">gate (eval job)</dt><dd><JobChip id={cycle.eval_job_id} /></dd></>)}
        {cycle.dataset_id && (
          <><dt className="text-neutral-500">feedback data</dt><dd><Link to={`/datasets/${cycle.dataset_id}`} className="font-mono text-accent hover:underline">{cycle.dataset_id}</Link>{cycle.rows !== undefined ? ` · ${cycle.rows} rows` : ''}</dd></>
        )}
        {cycle.candidate && (<><dt className="text-neutral-500">candidate</dt><dd><ModelLink id={cycle.candidate} name={modelName} /></dd></>)}
      </dl>
    </section>
  )
}

/** A job's link and its state (the job polled while it runs). */
export function JobChip({ id }: { id: string }) {
  const job = useJob(id)
  return (
    <span className="inline-flex items-center gap-3">
      <Link to={`/training/${id}`} className="font-mono text-accent hover:underline">{id}</Link>
      {job.data && <StatusLed state={job.data.state} />}
    </span>
  )
}
