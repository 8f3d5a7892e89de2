// /training: every job, newest first, live (jobs room + polling while something trains).
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { isLive, type JobState } from '../../api/vocabulary'
import { Empty, ErrorState, Loading } from '../../components/ui/States'
import { ProgressBar, StatusLed } from '../../components/ui/Status'
import { AlgorithmInfoButton } from '../../components/Training/AlgorithmInfo'
import { ALGORITHM_BY_ID, type Algorithm } from '../../components/Training/algorithms'
import { trainsNothing } from '../../components/Training/evaluation'
import { reportOf } from '../../components/Training/contract'
import { smoothedEta } from '../../components/Training/eta'
import { useJobMetrics, useJobs, type Job } from '../../components/Training/queries'
import { shortMetric } from '../../components/Training/report'
import { JobSparkline } from '../../components/Training/Sparkline'
import { isSdkRun } from '../../components/Training/sdkRun'
import { SdkRunBadge } from '../../components/Training/SdkRunBadge'
import { Tabs } from '../../components/ui/Tabs'
import { formatDuration } from '../../components/Training/wizardLogic'
import { useJobListEvents } from '../../hooks/useJobList'

const FILTERS: { id: JobState | 'all'; label: string }[] = [
  { id: 'all', label: 'All' },
  { id: 'running', label: 'Running' },
  { id: 'queued', label: 'Queued' },
  { id: 'paused', label: 'Paused' },
  { id: 'succeeded', label: 'Succeeded' },
  { id: 'failed', label: 'Failed' },
  { id: 'interrupted', label: 'Interrupted' },
  { id: 'cancelled', label: 'Cancelled' },
]

const COLUMNS = 'grid-cols-[7.5rem_minmax(0,1.5fr)_minmax(0,1.3fr)_minmax(0,1.1fr)_minmax(0,1.2fr)_9rem]'
const VERDICT_TONE = { learned: 'text-ok', not_learned: 'text-bad', unknown: 'text-warn' } as const

/** The report's held-out metric against the base model's, coloured by the verdict. */
function HeldOut({ job }: { job: Job }) {
  const report = reportOf(job)
  // An SDK run's client holds its data, a batch or eval job trains nothing: no held-out report.
  if (!report) return <span className="text-xs text-neutral-600">{isLive(job.state) && !isSdkRun(job) && !trainsNothing(job) ? 'after training' : '—'}</span>
  return (
    <span className={`text-xs ${VERDICT_TONE[report.verdict] ?? 'text-neutral-300'}`} title={report.metric?.label ?? report.warnings[0]?.message}>
      {report.verdict === 'not_learned' && <span aria-hidden>✗ </span>}
      {report.verdict === 'learned' && <span aria-hidden>✓ </span>}
      <span className="font-mono">{shortMetric(report.metric)}</span>
    </span>
  )
}

function JobRow({ job }: { job: Job }) {
  const algo = ALGORITHM_BY_ID[job.algorithm as Algorithm]
  const total = job.total_steps
  const metrics = useJobMetrics(job.id, isLive(job.state))
  const eta = smoothedEta(job, metrics.data?.data ?? [])
  return (
    <li>
      <Link
        to={`/training/${job.id}`}
        className={`grid ${COLUMNS} items-center gap-4 rounded-xl border border-transparent px-4 py-3 transition hover:border-ink-600 hover:bg-ink-800/60`}
      >
        <StatusLed state={job.state} />
        <div className="min-w-0">
          <div className="truncate font-medium text-neutral-100">{job.name}</div>
          <div className="truncate text-xs text-neutral-500">
            {isSdkRun(job) ? <SdkRunBadge job={job} /> : <span className="text-accent" title={algo?.name}>{algo?.short ?? job.algorithm}</span>} · {job.base_model}
            {job.backend === 'tinker' && ' · Tinker'}
          </div>
        </div>
        <div className="min-w-0">
          <ProgressBar value={job.progress ?? (job.state === 'succeeded' ? 1 : 0)} />
          <div className="mt-1 flex justify-between text-xs text-neutral-500">
            <span className="font-mono">
              {job.step}/{total ?? '?'}
            </span>
            <span>
              {eta !== null
                ? `ETA ${formatDuration(eta)}`
                : job.state === 'failed'
                  ? <span className="text-bad">{job.reason ? 'failed: see why' : 'failed'}</span>
                  : job.state === 'queued' ? 'waiting for a slot' : ''}
            </span>
          </div>
        </div>
        <HeldOut job={job} />
        <JobSparkline job={job} />
        <div className="text-right text-xs text-neutral-500">{new Date(job.created_at).toLocaleString()}</div>
      </Link>
    </li>
  )
}

export function JobListPage() {
  useJobListEvents()
  const [filter, setFilter] = useState<JobState | 'all'>('all')
  const jobs = useJobs(filter)
  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-6">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <h1 className="text-2xl font-semibold text-neutral-100">Training</h1>
          <p className="text-sm text-neutral-400">Jobs train a LoRA adapter on a dataset; every checkpoint becomes a model.</p>
        </div>
        <div className="flex flex-wrap gap-2">
          <AlgorithmInfoButton />
          <Link to="/training/new" className="btn-ghost">New job (advanced)</Link>
          <Link to="/training/wizard" className="btn-cta">Start with the wizard</Link>
        </div>
      </header>
      <Tabs tabs={FILTERS} value={filter} onChange={setFilter} />
      {jobs.isLoading ? (
        <Loading what="jobs" />
      ) : jobs.isError ? (
        <ErrorState error={jobs.error} what="jobs" />
      ) : !jobs.data?.data.length ? (
        filter === 'all' ? (
          <Empty
            title="No training jobs yet"
            next={
              <div className="flex flex-col gap-3">
                <span>Start with the wizard: pick a goal, a dataset and sensible defaults, and watch the model train live. Example datasets are already registered.</span>
                <Link to="/training/wizard" className="btn-cta self-start">Start with the wizard</Link>
              </div>
            }
          />
        ) : (
          <Empty title={`No ${filter} jobs`} next={<button type="button" className="text-accent hover:underline" onClick={() => setFilter('all')}>Show all jobs</button>} />
        )
      ) : (
        <div className="card p-2">
          <div className={`grid ${COLUMNS} gap-4 px-4 py-2 text-xs uppercase tracking-wider text-neutral-500`}>
            <span>State</span><span>Job</span><span>Progress</span><span>Held-out (vs base)</span><span>Training loss (live)</span><span className="text-right">Created</span>
          </div>
          <ul className="flex flex-col">
            {jobs.data.data.map((job) => <JobRow key={job.id} job={job} />)}
          </ul>
        </div>
      )}
    </div>
  )
}
