// /training/:jobId: one job, live. Its state, progress and metrics come from the socket
// (useJobEvents patches the query cache); charts, rollouts, log, checkpoints and config below.
// A batch job trains nothing: its results take the place of the report, and it has no
// checkpoints or rollouts. Nor does an eval job: its evaluation takes the report's place; nor a
// review job: its findings and its queue, for a person to answer, do.
import { useEffect, useState } from 'react'
import { Link, useParams } from 'react-router-dom'
import { isActive, isLive } from '../../api/vocabulary'
import { Empty, ErrorState, Loading } from '../../components/ui/States'
import { ProgressBar, StatusLed } from '../../components/ui/Status'
import { ALGORITHM_BY_ID, type Algorithm } from '../../components/Training/algorithms'
import { isSdkRun } from '../../components/Training/sdkRun'
import { SdkRunBadge } from '../../components/Training/SdkRunBadge'
import { AttemptsPanel } from '../../components/Training/AttemptsPanel'
import { parsePlacement, placementText, placementTitle } from '../../components/Training/attempts'
import { isBatchJob } from '../../components/Training/batch'
import { BatchResultsPanel } from '../../components/Training/BatchResults'
import { EvaluationPanel } from '../../components/Training/Evaluation'
import { isEvalJob, trainsNothing } from '../../components/Training/evaluation'
import { isReviewJob } from '../../components/Models/review'
import { ReviewPanel } from '../../components/Models/ReviewQueue'
import { Checkpoints } from '../../components/Training/Checkpoints'
import { ConfigPanel } from '../../components/Training/ConfigPanel'
import { JobControls } from '../../components/Training/JobControls'
import { LogTail } from '../../components/Training/LogTail'
import { MetricsPanel } from '../../components/Training/MetricsPanel'
import { useJob, useJobMetrics, type Job } from '../../components/Training/queries'
import { ReportPanel } from '../../components/Training/ReportPanel'
import { Rollouts } from '../../components/Training/Rollouts'
import { buildSeries, sortStages, STAGE_LABEL } from '../../components/Training/series'
import { Chip } from '../../components/ui/Chip'
import { Tabs } from '../../components/ui/Tabs'
import { smoothedEta } from '../../components/Training/eta'
import { formatDuration } from '../../components/Training/wizardLogic'
import { useJobEvents } from '../../hooks/useJobEvents'

type Tab = 'metrics' | 'rollouts' | 'log' | 'checkpoints' | 'config'

function FailureCard({ job }: { job: Job }) {
  return (
    <section role="alert" className="card border-bad/60 bg-bad/5">
      <h2 className="flex items-center gap-2 font-semibold text-bad">
        <span className="led bg-bad shadow-[0_0_8px_#ef4444]" /> This job failed
      </h2>
      <p className="mt-2 whitespace-pre-wrap text-sm text-neutral-200">{job.reason ?? 'No reason was recorded.'}</p>
      {job.log_tail && (
        // Opened at the bottom: a traceback's last lines say what went wrong.
        <pre ref={(el) => { if (el) el.scrollTop = el.scrollHeight }} className="mt-3 max-h-72 overflow-auto rounded-xl bg-ink-950 p-3 font-mono text-xs text-neutral-300">{job.log_tail}</pre>
      )}
      {job.retryable ? (
        <p className="mt-3 text-xs text-neutral-400">
          This failure may not happen again (the worker was lost, or the machine ran short): <b>Resume</b> continues from
          {isBatchJob(job) ? ' the inputs not answered yet' : isEvalJob(job) ? ' the models not answered yet' : isReviewJob(job) ? ' the start: the committee scores the pairs again' : ' the last checkpoint'}. TRAINING_GUIDE.md "Troubleshooting" lists common causes.
        </p>
      ) : isReviewJob(job) && job.parent_model_id ? (
        <p className="mt-3 flex flex-wrap items-center gap-3 text-sm text-neutral-300">
          <span>Resuming would fail the same way: start a new review from the reward model's page.</span>
          <Link to={`/models/${job.parent_model_id}`} className="btn-cta">The reward model's page</Link>
        </p>
      ) : (
        <p className="mt-3 flex flex-wrap items-center gap-3 text-sm text-neutral-300">
          <span>Resuming would fail the same way: fix the settings and start a new job.</span>
          <Link to={`/training/new?from_job=${job.id}`} className="btn-cta">Start a new job from these settings</Link>
        </p>
      )}
    </section>
  )
}

/** "stale — no heartbeat for N s": the server's count when it said so, ticking on here. */
function StaleBadge({ ageS }: { ageS: number }) {
  const [elapsed, setElapsed] = useState(0)
  useEffect(() => {
    const timer = setInterval(() => setElapsed((e) => e + 1), 1000)
    return () => clearInterval(timer)
  }, [])
  return (
    <span
      data-testid="job-stale"
      title="Its worker has not touched its heartbeat for heartbeat_timeout_s: it may be stopped or hung. Past heartbeat_kill_s the server kills it and marks the job interrupted (resumable)."
    >
      <Chip tone="warn">stale — no heartbeat for {Math.round(ageS + elapsed)} s</Chip>
    </span>
  )
}

/** Where the current (or last) attempt's worker runs: "Runs on node 10.0.0.5 (host-b) · GPUs 0,1 · Ray". */
function PlacementLine({ job }: { job: Job }) {
  const placement = parsePlacement(job.placement)
  if (!placement) return null
  const verb = isActive(job.state) ? 'Runs on' : 'Ran on'
  return (
    <span className="text-xs text-neutral-400" data-testid="job-placement" title={placementTitle(placement)}>
      {placement.executor === 'local' ? '' : `${verb} `}
      <span className="font-mono text-neutral-300">{placementText(placement)}</span>
    </span>
  )
}

function Header({ job, connected, stage, eta }: { job: Job; connected: boolean; stage: string | null; eta: number | null }) {
  const algo = ALGORITHM_BY_ID[job.algorithm as Algorithm]
  return (
    <header className="card flex flex-col gap-4">
      <div className="flex flex-wrap items-start justify-between gap-4">
        <div className="min-w-0">
          <Link to="/training" className="text-xs text-neutral-500 hover:text-accent">← All jobs</Link>
          <h1 className="mt-1 truncate text-2xl font-semibold text-neutral-100">{job.name}</h1>
          <div className="mt-2 flex flex-wrap items-center gap-2">
            <span data-testid="job-state"><StatusLed state={job.state} /></span>
            {job.stale && <StaleBadge key={job.heartbeat_age_s ?? 0} ageS={job.heartbeat_age_s ?? 0} />}
            {isSdkRun(job) ? <SdkRunBadge job={job} /> : <Chip tone="accent">{algo ? `${algo.short} · ${algo.name}` : job.algorithm}</Chip>}
            {stage && STAGE_LABEL[stage] && stage !== 'main' && <Chip tone="cta">{STAGE_LABEL[stage]}</Chip>}
            <Chip>{job.base_model}</Chip>
            {job.parent_model_id && (
              <span className="text-xs text-neutral-400" data-testid="parent-model">
                {isReviewJob(job) ? 'reviews' : 'continues from'} <Link to={`/models/${job.parent_model_id}`} className="font-mono text-accent hover:underline">{job.parent_model_id}</Link>
              </span>
            )}
            <Chip>{job.backend}</Chip>
            <PlacementLine job={job} />
            {job.dataset_id && <Link to={`/datasets/${job.dataset_id}`}><Chip>dataset {job.dataset_id}</Chip></Link>}
            <span className="font-mono text-xs text-neutral-600">{job.id}</span>
          </div>
        </div>
        <JobControls job={job} />
      </div>
      <div>
        <ProgressBar value={job.progress ?? (job.state === 'succeeded' ? 1 : 0)} />
        <div className="mt-2 flex flex-wrap justify-between gap-2 text-xs text-neutral-400">
          <span className="font-mono" data-testid="job-progress">
            {isBatchJob(job) ? 'shard' : isEvalJob(job) ? 'model' : isReviewJob(job) ? 'checkpoint' : 'step'} {job.step} / {job.total_steps ?? '?'}{stage && stage !== 'main' ? ' of this stage' : ''}
          </span>
          <span>
            {eta !== null && <span data-testid="job-eta">ETA {formatDuration(eta)} · </span>}
            {isLive(job.state) && (
              <span className={connected ? 'text-ok' : 'text-warn'}>{connected ? '● live' : '○ reconnecting…'}</span>
            )}
            {job.finished_at && <>finished {new Date(job.finished_at).toLocaleString()}</>}
          </span>
        </div>
      </div>
    </header>
  )
}

export function JobPage() {
  const { jobId = '' } = useParams()
  const job = useJob(jobId)
  const { logs, connected } = useJobEvents(jobId)
  const metrics = useJobMetrics(jobId)
  const [tab, setTab] = useState<Tab>('metrics')
  if (job.isLoading) return <Loading what="the job" />
  if (job.isError || !job.data) {
    return (
      <div className="flex flex-col gap-4">
        <ErrorState error={job.error} what={`job ${jobId}`} />
        <Link to="/training" className="text-accent hover:underline">← Back to all jobs</Link>
      </div>
    )
  }
  const j = job.data
  const isRl = j.algorithm === 'rl' || j.algorithm === 'rlhf'
  const batch = isBatchJob(j)
  const evaluating = isEvalJob(j)
  const reviewing = isReviewJob(j)
  const stages = buildSeries(metrics.data?.data ?? [])
  const tabs: { id: Tab; label: string }[] = [
    { id: 'metrics', label: 'Metrics' },
    ...(isRl ? [{ id: 'rollouts' as const, label: 'Rollouts' }] : []),
    { id: 'log', label: 'Log' },
    ...(trainsNothing(j) ? [] : [{ id: 'checkpoints' as const, label: 'Checkpoints' }]),
    { id: 'config', label: 'Config' },
  ]
  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-5">
      <Header job={j} connected={connected} eta={smoothedEta(j, metrics.data?.data ?? [])} stage={j.algorithm === 'rlhf' ? (sortStages(stages).at(-1)?.stage ?? null) : null} />
      {j.state === 'failed' && <FailureCard job={j} />}
      {batch ? (
        <BatchResultsPanel job={j} />
      ) : evaluating ? (
        <EvaluationPanel job={j} />
      ) : reviewing ? (
        <ReviewPanel job={j} />
      ) : (
        <ReportPanel job={j} onCheckpoints={() => setTab('checkpoints')} />
      )}
      <AttemptsPanel job={j} />
      <Tabs tabs={tabs} value={tab} onChange={setTab} />
      {tab === 'metrics' &&
        (metrics.isLoading ? (
          <Loading what="metrics" />
        ) : metrics.isError ? (
          <ErrorState error={metrics.error} what="metrics" />
        ) : stages.length === 0 ? (
          <Empty
            title="No metrics yet"
            next={
              isSdkRun(j)
                ? isLive(j.state)
                  ? 'Charts appear live when the SDK client finishes its first optim_step.'
                  : 'The SDK client finished no optimizer step.'
                : batch
                  ? isLive(j.state)
                    ? 'The first shard is on its way: its counts are charted here live as soon as it is done.'
                    : 'This job finished no shard.'
                  : evaluating
                    ? isLive(j.state)
                      ? "The first model is answering: each model's score and NLL are charted here as soon as it is done."
                      : 'No model finished answering.'
                  : reviewing
                    ? isLive(j.state)
                      ? "The committee's first checkpoint is scoring the pairs: each checkpoint's agreement with the labels is charted here as soon as it is done."
                      : 'No checkpoint finished scoring.'
                  : isLive(j.state)
                    ? 'The first step is on its way: charts appear here live as soon as it is logged.'
                    : 'This job logged no training steps.'
            }
          />
        ) : (
          <MetricsPanel stages={stages} />
        ))}
      {tab === 'rollouts' && <Rollouts jobId={j.id} live={isLive(j.state)} />}
      {tab === 'log' && <LogTail jobId={j.id} live={logs} />}
      {tab === 'checkpoints' && <Checkpoints jobId={j.id} />}
      {tab === 'config' && <ConfigPanel job={j} />}
    </div>
  )
}
