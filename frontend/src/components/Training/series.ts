// From metrics rows (GET /metrics plus live events) to chart data. Rows can arrive twice: the
// socket replays a job's events from seq 1 while the page has already fetched metrics.jsonl,
// so rows are deduplicated by (stage, step), the later copy winning.
import { isMetricKey, type SeriesMap } from '../../lib/metrics'

export type MetricRow = Record<string, unknown> & { step: number }

export interface StageSeries {
  stage: string
  /** One row per step, sorted; only numeric metric values. */
  rows: Record<string, number>[]
  /** Metric keys in first-seen order. */
  keys: string[]
  /** Each key's values in step order (steps where it was not logged are skipped). */
  series: SeriesMap
}

function numeric(v: unknown): number | null {
  return typeof v === 'number' ? v : null
}

/** Group rows by RLHF stage ("main" when a row has none), dedupe, add derived metrics. */
export function buildSeries(raw: readonly Record<string, unknown>[]): StageSeries[] {
  const byStage = new Map<string, Map<number, Record<string, number>>>()
  // Live rows from useJobEvents carry no `stage` (the hook drops it); in an RLHF job they
  // belong to the stage training now, which is the last one seen.
  let lastStage: string | null = null
  for (const r of raw) {
    const step = numeric(r.step)
    if (step === null) continue
    if (typeof r.stage === 'string') lastStage = r.stage
    const stage = typeof r.stage === 'string' ? r.stage : (lastStage ?? 'main')
    const rows = byStage.get(stage) ?? new Map<number, Record<string, number>>()
    byStage.set(stage, rows)
    const row: Record<string, number> = { ...(rows.get(step) ?? {}), step }
    for (const [k, v] of Object.entries(r)) {
      if (isMetricKey(k) && typeof v === 'number') row[k] = v
    }
    // Tokens per second for SL, which logs tokens and time but not their ratio.
    if (row.num_tokens !== undefined && row.step_time_s > 0 && row.num_sequences !== undefined) {
      row.train_tokens_per_s = row.num_tokens / row.step_time_s
    }
    rows.set(step, row)
  }
  return [...byStage.entries()].map(([stage, map]) => {
    const rows = [...map.values()].sort((a, b) => a.step - b.step)
    const keys: string[] = []
    const series: Record<string, number[]> = {}
    for (const row of rows) {
      for (const [k, v] of Object.entries(row)) {
        if (k === 'step') continue
        if (!(k in series)) {
          keys.push(k)
          series[k] = []
        }
        series[k].push(v)
      }
    }
    return { stage, rows, keys, series }
  })
}

/** The stage order of RLHF, so tabs read SL → judge → RL. */
export const STAGE_ORDER = ['main', 'sl', 'rm', 'rl']
export const STAGE_LABEL: Record<string, string> = {
  main: 'Metrics',
  sl: 'Stage 1 · SL',
  rm: 'Stage 2 · reward model',
  rl: 'Stage 3 · RL',
}

export function sortStages(stages: StageSeries[]): StageSeries[] {
  const rank = (s: string) => (STAGE_ORDER.includes(s) ? STAGE_ORDER.indexOf(s) : 99)
  return [...stages].sort((a, b) => rank(a.stage) - rank(b.stage))
}
