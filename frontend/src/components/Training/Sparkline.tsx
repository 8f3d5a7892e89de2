// The job list's live loss curve: a fixed-size Recharts line (no axes) of the job's primary
// metric, so a glance tells falling loss from a flat or climbing one.
import { Line, LineChart, YAxis } from 'recharts'
import { formatValue, metricInfo, primaryMetric } from '../../lib/metrics'
import { isLive } from '../../api/vocabulary'
import { useJobMetrics, type Job } from './queries'
import { buildSeries } from './series'

export function JobSparkline({ job }: { job: Job }) {
  const metrics = useJobMetrics(job.id, isLive(job.state))
  const stages = buildSeries(metrics.data?.data ?? [])
  // RLHF: the latest stage is the one training now.
  const stage = stages[stages.length - 1]
  const key = stage ? primaryMetric(stage.keys) : null
  if (!stage || !key) {
    return <span className="text-xs text-neutral-600">{metrics.isLoading ? '…' : 'no metrics yet'}</span>
  }
  const data = stage.rows.filter((r) => r[key] !== undefined).map((r) => ({ step: r.step, v: r[key] }))
  const latest = data[data.length - 1]?.v
  return (
    <div className="flex items-center gap-2" title={`${metricInfo(key).label}: ${formatValue(latest)}`}>
      <LineChart width={110} height={30} data={data}>
        <YAxis hide domain={['auto', 'auto']} />
        <Line type="monotone" dataKey="v" stroke="#0ea5e9" strokeWidth={1.5} dot={false} isAnimationActive={false} />
      </LineChart>
      <span className="w-24 text-[11px] leading-tight text-neutral-400">
        <span className="block text-neutral-500">{metricInfo(key).label}</span>
        <span className="font-mono text-neutral-200">{formatValue(latest)}</span>
      </span>
    </div>
  )
}
