// Analytics: pick runs, overlay their curves, diff their configs, compare their evaluations
// and the models they produced. ?runs=<id>,<id> keeps the selection in the URL.
import { useQueries, useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useSearchParams } from 'react-router-dom'
import { api, unwrap, type Schemas } from '../../api/client'
import { isLive } from '../../api/vocabulary'
import { ConfigDiffTable } from '../../components/Analytics/ConfigDiffTable'
import { EvalTable } from '../../components/Analytics/EvalTable'
import { MetricChart } from '../../components/Analytics/MetricChart'
import { fetchAllMetrics, finalEval, metricNames } from '../../components/Analytics/metrics'
import { ModelSummary } from '../../components/Analytics/ModelSummary'
import { RunPicker } from '../../components/Analytics/RunPicker'
import { Empty, ErrorState, Loading } from '../../components/ui/States'

type Job = Schemas['JobPublic']
const PREFERRED = ['train_mean_nll', 'loss', 'reward_mean', 'dpo_loss', 'eval_mean_nll']

export function AnalyticsView() {
  const jobs = useQuery({
    queryKey: ['analytics-jobs'],
    queryFn: async () => unwrap(await api.GET('/api/jobs', { params: { query: { limit: 200 } } })).data,
    refetchInterval: 10_000,
  })
  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-6">
      <header>
        <h1 className="text-2xl font-semibold text-neutral-100">Analytics</h1>
        <p className="mt-1 text-sm text-neutral-400">Overlay runs, see which settings differ, and compare what each run and model achieved.</p>
      </header>
      {jobs.isPending ? (
        <Loading what="runs" />
      ) : jobs.isError ? (
        <ErrorState error={jobs.error} what="the runs" />
      ) : jobs.data.length === 0 ? (
        <Empty title="No runs to analyse yet"
          next={<>Train a job first: <Link className="text-accent hover:underline" to="/training">open Training</Link> and launch one with the wizard. Its curves, config and evaluation appear here.</>} />
      ) : (
        <Comparison jobs={jobs.data} />
      )}
    </div>
  )
}

function Comparison({ jobs }: { jobs: Job[] }) {
  const [params, setParams] = useSearchParams()
  const fromUrl = params.get('runs')?.split(',').filter((id) => jobs.some((j) => j.id === id))
  // By default the two newest runs that have logged something: the usual "what changed?".
  const selected = fromUrl ?? jobs.filter((j) => j.step > 0).slice(0, 2).map((j) => j.id)
  const toggle = (id: string) => {
    const next = selected.includes(id) ? selected.filter((x) => x !== id) : [...selected, id]
    setParams({ runs: next.join(',') }, { replace: true })
  }
  const chosen = selected.map((id) => jobs.find((j) => j.id === id)).filter((j): j is Job => j !== undefined)
  return (
    <div className="grid grid-cols-[300px_minmax(0,1fr)] gap-6">
      <RunPicker jobs={jobs} selected={selected} onToggle={toggle} />
      <div className="flex min-w-0 flex-col gap-6">
        {chosen.length === 0 ? (
          <Empty title="Select runs to compare" next="Pick one or more runs on the left: their curves, configs and results line up here." />
        ) : (
          <RunDetails jobs={chosen} allJobs={jobs} />
        )}
      </div>
    </div>
  )
}

function RunDetails({ jobs, allJobs }: { jobs: Job[]; allJobs: Job[] }) {
  const [metric, setMetric] = useState<string | null>(null)
  const metrics = useQueries({
    queries: jobs.map((job) => ({
      queryKey: ['job-metrics-all', job.id],
      queryFn: () => fetchAllMetrics(job.id),
      refetchInterval: isLive(job.state) ? 5_000 : (false as const),
    })),
  })
  const models = useQuery({
    queryKey: ['analytics-models'],
    queryFn: async () => unwrap(await api.GET('/api/models', { params: { query: { limit: 1000 } } })).data,
  })
  const failed = metrics.find((m) => m.isError)
  if (failed) return <ErrorState error={failed.error} what="the run metrics" />
  if (metrics.some((m) => m.isPending)) return <Loading what="metrics" />
  const runs = jobs.map((job, i) => ({ id: job.id, name: job.name, rows: metrics[i].data ?? [] }))
  const names = [...new Set(runs.flatMap((r) => metricNames(r.rows)))].sort()
  const current = metric && names.includes(metric) ? metric : PREFERRED.find((p) => names.includes(p)) ?? names[0] ?? ''
  return (
    <>
      <MetricChart runs={runs} metric={current} metrics={names} onMetric={setMetric} />
      <EvalTable runs={runs.map((r) => ({ id: r.id, name: r.name, evals: finalEval(r.rows) }))} />
      <ConfigDiffTable jobs={jobs} />
      {models.isError ? (
        <ErrorState error={models.error} what="the models" />
      ) : models.isPending ? (
        <Loading what="models" />
      ) : (
        <ModelSummary models={models.data} jobNames={new Map(allJobs.map((j) => [j.id, j.name]))} selectedJobs={jobs.map((j) => j.id)} />
      )}
    </>
  )
}
