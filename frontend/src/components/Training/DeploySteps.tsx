// After launch: the job's way from request to training, from live events (queued → starting →
// running → done), then the verdict of its report and what happens next.
import { Link } from 'react-router-dom'
import { ProgressBar } from '../ui/Status'
import { useJobEvents } from '../../hooks/useJobEvents'
import { reportOf } from './contract'
import { smoothedEta } from './eta'
import { isLive, type JobState } from '../../api/vocabulary'
import { useJob, useJobMetrics, useJobModels, type Job } from './queries'
import { verdictLine } from './report'
import { JobSparkline } from './Sparkline'
import { formatDuration } from './wizardLogic'

const STEPS: { state: JobState; title: string; detail: string }[] = [
  { state: 'queued', title: 'Queued', detail: 'Validated against the dataset and waiting for a free slot (one job per GPU, a few on CPU).' },
  { state: 'starting', title: 'Starting', detail: 'A worker process loads the base model and renders the dataset.' },
  { state: 'running', title: 'Training', detail: 'Steps run; metrics, log lines and checkpoints stream in live.' },
  { state: 'succeeded', title: 'Done', detail: 'The final checkpoint is saved and every checkpoint is a model in the library.' },
]
const ORDER: JobState[] = ['queued', 'starting', 'running', 'succeeded']

/** A finished job's verdict: the Playground is offered only when it learned. */
function Verdict({ job }: { job: Job }) {
  const report = reportOf(job)
  const models = useJobModels(job.id)
  const last = [...(models.data?.data ?? [])].sort((a, b) => b.step - a.step)[0]
  if (!report) {
    return (
      <p data-testid="verdict" className="rounded-xl border border-ink-600 p-3 text-sm text-neutral-300">
        Done. This job has no report, so whether it learned is not known: open its page to compare its held-out metrics.
      </p>
    )
  }
  if (report.verdict === 'learned') {
    return (
      <div className="flex flex-wrap items-center justify-between gap-3 rounded-xl border border-ok/50 bg-ok/5 p-3">
        <p data-testid="verdict" className="text-sm text-ok">Done. {verdictLine(report)}.</p>
        {last && <Link to={`/playground?model=${encodeURIComponent(last.id)}`} className="btn-cta">Try it in the Playground</Link>}
      </div>
    )
  }
  const first = report.warnings[0]
  const bad = report.verdict === 'not_learned'
  return (
    <div role="alert" className={`flex flex-col gap-2 rounded-xl border p-3 ${bad ? 'border-bad/60 bg-bad/5' : 'border-warn/50 bg-warn/5'}`}>
      <p data-testid="verdict" className={`text-sm ${bad ? 'text-bad' : 'text-warn'}`}>Done, but: {verdictLine(report)}.</p>
      {first && (
        <p className="text-sm text-neutral-300">
          <b className="text-warn">{first.message}</b>
          {first.cause && <> {first.cause}</>}
          {first.fix && <> Change: <span className="font-mono text-xs text-accent">{first.fix}</span></>}
        </p>
      )}
      <Link to={`/training/new?from_job=${job.id}`} className="btn-ghost self-start">Train again with these settings changed →</Link>
    </div>
  )
}

export function DeploySteps({ jobId }: { jobId: string }) {
  const job = useJob(jobId)
  const metrics = useJobMetrics(jobId)
  useJobEvents(jobId)
  const eta = job.data ? smoothedEta(job.data, metrics.data?.data ?? []) : null
  const state = job.data?.state ?? 'queued'
  const reached = ORDER.indexOf(state)
  // stopped short of the end: failed, cancelled, paused or interrupted
  const ended = !isLive(state) && state !== 'succeeded'
  return (
    <div className="flex flex-col gap-5">
      <ol className="grid gap-3 md:grid-cols-4" aria-label="Deploy steps">
        {STEPS.map((s, i) => {
          const done = reached > i || state === 'succeeded'
          const now = reached === i && state !== 'succeeded'
          return (
            <li key={s.state} data-state={done ? 'done' : now ? 'current' : 'todo'} className={`rounded-xl border p-4 ${now ? 'border-accent/70 bg-accent/5' : done ? 'border-ok/40' : 'border-ink-700 opacity-60'}`}>
              <div className="flex items-center gap-2 text-sm font-medium text-neutral-100">
                <span className={`led ${done ? 'bg-ok shadow-[0_0_8px_#22c55e]' : now ? 'bg-accent animate-pulse shadow-[0_0_10px_#0ea5e9]' : 'bg-ink-600'}`} />
                {i + 1}. {s.title} {done && <span className="text-ok">✓</span>}
              </div>
              <p className="mt-1 text-xs text-neutral-400">{s.detail}</p>
            </li>
          )
        })}
      </ol>
      {ended && (
        <p role="alert" className="rounded-xl border border-bad/50 bg-bad/5 p-3 text-sm text-bad">
          The job is <b>{state}</b>{job.data?.reason ? `: ${job.data.reason}` : ''}.{' '}
          {job.data?.retryable ? (
            'Open its page for the log and to resume.'
          ) : (
            <>Fix the settings and <Link to={`/training/new?from_job=${jobId}`} className="underline">start a new job from them</Link>.</>
          )}
        </p>
      )}
      {state === 'succeeded' && job.data && <Verdict job={job.data} />}
      {job.data && (
        <div className="card flex flex-wrap items-center gap-6">
          <div className="min-w-56 flex-1">
            <ProgressBar value={job.data.progress} />
            <p className="mt-1 font-mono text-xs text-neutral-400">
              step {job.data.step} / {job.data.total_steps ?? '?'}
              {eta !== null && ` · ETA ${formatDuration(eta)}`}
            </p>
          </div>
          <JobSparkline job={job.data} />
          <Link to={`/training/${jobId}`} className="btn-cta">Watch it live →</Link>
        </div>
      )}
      <section className="card">
        <h3 className="font-semibold text-neutral-100">What happens next</h3>
        <ol className="mt-2 list-decimal space-y-1.5 pl-5 text-sm text-neutral-300">
          <li>The job page shows every metric live, with what each one means and a warning if it leaves its healthy range.</li>
          <li>Every <code>save_every</code> steps a checkpoint is saved; each becomes a model in <Link to="/models" className="text-accent hover:underline">Models</Link>, with its lineage (dataset, job, step, metrics).</li>
          <li>When it ends, a report says whether it learned: its held-out score against the base model's, with what to change if it did not.</li>
          <li>Open a model in the <Link to="/playground" className="text-accent hover:underline">Playground</Link> to chat with it, or compare it side by side with the base model.</li>
          <li>Thumbs up / down and edited answers in the Playground become data for your next job.</li>
        </ol>
      </section>
    </div>
  )
}
