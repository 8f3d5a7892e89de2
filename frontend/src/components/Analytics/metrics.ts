// Run metrics for Analytics: every page of GET /api/jobs/{id}/metrics, the numeric series in
// them, and the rows merged by step so several runs overlay on one chart.
import { api, unwrap, type Schemas } from '../../api/client'

export type MetricRow = Record<string, unknown>

/** Not curves: the step is the x axis and the wall-clock time is not comparable across runs. */
const NOT_METRICS = new Set(['step', 'time', 'stage'])

export async function fetchAllMetrics(jobId: string): Promise<MetricRow[]> {
  const rows: MetricRow[] = []
  let offset: number | null = 0
  while (offset !== null) {
    const page: Schemas['MetricsPage'] = unwrap(await api.GET('/api/jobs/{job_id}/metrics', {
      params: { path: { job_id: jobId }, query: { offset, limit: 1000 } },
    }))
    rows.push(...page.data)
    offset = page.data.length === 0 ? null : page.next_offset
  }
  return rows
}

export function metricNames(rows: MetricRow[]): string[] {
  const names = new Set<string>()
  for (const row of rows)
    for (const [k, v] of Object.entries(row)) if (!NOT_METRICS.has(k) && typeof v === 'number') names.add(k)
  return [...names].sort()
}

export function isEvalMetric(name: string): boolean {
  return /^(base_)?eval_/.test(name) || /(^|_)(exact_match|accuracy)$/.test(name)
}

/** The last logged value of each evaluation metric: what the run ended with. */
export function finalEval(rows: MetricRow[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const row of rows)
    for (const [k, v] of Object.entries(row)) if (isEvalMetric(k) && typeof v === 'number') out[k] = v
  return out
}

export type ChartPoint = { step: number } & Record<string, number | undefined>

/** One point per step; each run's value of `metric` under the run's id. */
export function mergeSeries(runs: { id: string; rows: MetricRow[] }[], metric: string): ChartPoint[] {
  const byStep = new Map<number, ChartPoint>()
  for (const run of runs) {
    for (const row of run.rows) {
      const step = row.step
      const value = row[metric]
      if (typeof step !== 'number' || typeof value !== 'number' || !Number.isFinite(value)) continue
      const point = byStep.get(step) ?? { step }
      point[run.id] = value
      byStep.set(step, point)
    }
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step)
}

export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return String(value)
  const abs = Math.abs(value)
  return abs !== 0 && (abs < 1e-3 || abs >= 1e5) ? value.toExponential(2) : value.toFixed(4)
}

/** Lower is better for losses and NLLs; higher for accuracy, exact match and rewards. */
export function lowerIsBetter(metric: string): boolean {
  return /(loss|nll|perplexity|kl|grad_norm|time)/.test(metric)
}
