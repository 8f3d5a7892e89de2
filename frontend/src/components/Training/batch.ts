// A batch job (`batch`): a model answers every row of a dataset over a pool of actors, each
// output with a confidence. It trains nothing: no report, no checkpoints, no model. Its results
// come from GET /api/jobs/{id}/results, whose rows and actors the OpenAPI document leaves as
// plain mappings: typed here as algorithms/batch.py and pool.py write them.
import { configField, configSchema } from '../../api/jobConfig'
import type { Schemas } from '../../api/client'
import type { Job } from './queries'

export type BatchResults = Schemas['BatchResultsPublic']

/** One input's result: its answer, or the error of a shard that failed on every try. */
export interface BatchRow {
  index: number
  /** The file the input came from (review and fix tasks). */
  path?: string
  output?: string
  /** The share of samples that gave this answer, 0 to 1. */
  confidence?: number
  mean_logprob?: number
  distinct_answers?: number
  samples?: number
  /** False: the answer hit max_tokens before it ended. */
  terminated?: boolean
  flagged?: boolean
  apply?: boolean
  reference?: string
  /** task fix: the corrected file, and whether the row's tests passed with it (null: none). */
  fix?: string
  verified?: boolean | null
  verification?: string
  error?: string
}

/** One actor of the pool, as pool.json shows it. */
export interface PoolActor {
  id: number
  /** starting, idle, busy, lost or stopped */
  state: string
  pid: number | null
  node: string | null
  shard: number | null
  shards_done: number
  lost_reason: string | null
}

/** Whether a job is batch work rather than training. */
export function isBatchJob(job: Pick<Job, 'algorithm'>): boolean {
  return job.algorithm === 'batch'
}

/** A setting of a batch job: as its config holds it, else the schema's default. */
export function batchSetting(job: Pick<Job, 'config'>, key: string): unknown {
  const config = job.config as Record<string, unknown>
  return config[key] ?? configField(configSchema('batch'), key)?.default ?? null
}

/** "75%" for 0.75; "—" when unknown. */
export function percent(value: number | null | undefined): string {
  return typeof value === 'number' && Number.isFinite(value) ? `${Math.round(value * 100)}%` : '—'
}

/** The latest value of a metric over a job's metrics rows (the last shard's), or null. */
export function latestMetric(rows: readonly Record<string, unknown>[], key: string): number | null {
  for (let i = rows.length - 1; i >= 0; i--) {
    const v = rows[i][key]
    if (typeof v === 'number') return v
  }
  return null
}

/** How the samples agreed: "3 of 4 samples agree · 2 distinct answers · mean logprob -0.31". */
export function agreement(row: BatchRow): string {
  const parts: string[] = []
  if (typeof row.samples === 'number' && typeof row.confidence === 'number') {
    parts.push(`${Math.round(row.confidence * row.samples)} of ${row.samples} samples agree`)
  }
  if (typeof row.distinct_answers === 'number') parts.push(`${row.distinct_answers} distinct ${row.distinct_answers === 1 ? 'answer' : 'answers'}`)
  if (typeof row.mean_logprob === 'number') parts.push(`mean logprob ${row.mean_logprob.toFixed(2)}`)
  return parts.join(' · ')
}
