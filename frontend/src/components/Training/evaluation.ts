// An eval job (`eval`): a baseline and other models answer one eval set, each answer is scored,
// every pair of models is compared with its significance. It trains nothing: no report, no
// checkpoints, no model. Its results come from GET /api/jobs/{id}/evaluation and the ranking of
// an eval set from GET /api/models/leaderboard, whose rows the OpenAPI document leaves as plain
// mappings: typed here as algorithms/evaluation.py, significance.py and services/evaluations.py
// write them (NaN and infinities arrive as null).
import type { operations } from '../../api/schema'
import type { Job } from './queries'

/** One model's figures over the eval set. */
export interface EvalModelFigures {
  /** Its label in the results: a library model's name, else what was evaluated. */
  name: string
  /** What was evaluated: a base model, or sampler weights (a path on the server). */
  model: string
  /** The library model it is (mdl_…), or null. */
  id: string | null
  score_mean: number | null
  /** The bootstrap 95% interval of score_mean. */
  score_interval: [number, number] | null
  /** Mean NLL per token of the reference answers. */
  nll_mean: number | null
  prompts: number
  /** The share of answers that ended on their own (not cut by max_tokens); null with scorer nll. */
  terminated_rate: number | null
}

/** B (the later model) against A (the earlier), prompt by prompt. */
export interface EvalComparison {
  a: string
  b: string
  n: number
  /** Prompts B won, tied and lost. */
  wins: number
  ties: number
  losses: number
  /** B's share of the prompts, a tie counting half. */
  win_rate: number | null
  /** The bootstrap 95% interval of win_rate. */
  interval: [number, number] | null
  /** The sign test's, ties left out. */
  p_value: number | null
  significant: boolean
  verdict: string
}

/** A model's place on a Bradley-Terry leaderboard (Elo scale: 1000 at the geometric mean). */
export interface EvalRating {
  /** The model's name (in a job's summary). */
  model: string
  rank: number
  rating: number | null
  strength: number | null
  /** Ties counted half. */
  wins: number
  games: number
}

/** evaluation.json: null until the job succeeded. */
export interface EvalSummary {
  /** The eval set's path on the server (the job's dataset_id names it). */
  dataset: string
  prompts: number
  scorer: string
  samples: number
  temperature: number
  alpha: number
  models: EvalModelFigures[]
  comparisons: EvalComparison[]
  leaderboard: EvalRating[]
}

/** One model's answers to one prompt. With scorer nll nothing is generated: no answers,
 * scores or terminated, and score is minus nll. */
export interface EvalAnswer {
  model: string
  /** The mean of its answers' scores. */
  score: number | null
  nll: number | null
  nll_tokens?: number
  answers?: string[]
  scores?: (number | null)[]
  terminated?: boolean[]
  /** Scorer llm_judge: the judge's reply to each answer, its grade read from it. */
  judge_replies?: string[]
}

/** One prompt of samples.jsonl. */
export interface EvalSampleRow {
  index: number
  prompt: string
  reference: string | null
  /** The models' scores differ. */
  disagree: boolean
  answers: EvalAnswer[]
}

/** A model of an eval set's leaderboard, across every finished eval job on it. */
export interface LeaderboardEntry extends Omit<EvalRating, 'model'> {
  /** The same model across jobs: its library id, else what was evaluated. */
  key: string
  id: string | null
  name: string
  /** What was evaluated: a base model, or sampler weights. */
  model: string
  /** Its mean score in the latest job that evaluated it. */
  score_mean: number | null
  job_id: string
}

export type EvaluationQuery = NonNullable<operations['read_job_evaluation']['parameters']['query']>

/** Whether a job evaluates models rather than training one. */
export function isEvalJob(job: Pick<Job, 'algorithm'>): boolean {
  return job.algorithm === 'eval'
}

const TRAINS_NOTHING: readonly string[] = ['batch', 'eval', 'review']

/** Whether a job trains nothing (batch answers, evaluations, reviews): no report, no
 * checkpoints, no model. */
export function trainsNothing(job: Pick<Job, 'algorithm'>): boolean {
  return TRAINS_NOTHING.includes(job.algorithm)
}

/** What each scorer does, for the form. */
export const SCORER_HELP: Record<string, string> = {
  exact_match: "The answer's final answer equals the reference (numbers compared as numbers): 1, else 0; an answer cut off or without one loses 0.1 more.",
  regex: 'The answer matches a pattern: 1, else 0 (Python syntax; inline flags such as (?s)).',
  code: "The answer's code passes the row's tests, run in the sandbox (problem rows with tests).",
  python: 'Your function ("module:function") scores each answer, run in the sandbox.',
  nll: "Nothing is generated: the score is minus the model's mean NLL per token of the reference answer.",
  llm_judge: 'A model grades each answer from 1 to 10 against the reference: a model Thinker serves, or one at an OpenAI-compatible endpoint (its key stored in the settings, PUT /api/settings/judge-key). Score (grade - 1) / 9; a reply without a grade scores 0.',
  reward_model: "A trained reward model (an RLHF job's rm stage in the library) scores each answer: a judge gives P(it beats the row's reference), so an answer as good as the reference scores about 0.5.",
}

/** The models an eval job evaluates, as its config holds them once the server resolved them
 * (the baseline first): each one's label. */
export function evalModelLabels(config: unknown): string[] {
  const models = (config as { models?: unknown } | null)?.models
  if (!Array.isArray(models)) return []
  return models.map((m) => {
    if (typeof m === 'string') return m
    const entry = m as { name?: unknown; model?: unknown }
    return String(entry.name ?? entry.model ?? '?')
  })
}

/** A share as a whole percent, "64%", rounded as the server's verdicts round it (half to even,
 * so 0.965 reads 96% on the axis as in the verdict); "—" when unknown. */
export function ratePercent(value: number | null | undefined): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—'
  const x = value * 100
  const floor = Math.floor(x)
  // an exact half (as Python sees the float) goes to the even neighbour
  const whole = x - floor === 0.5 ? (floor % 2 === 0 ? floor : floor + 1) : Math.round(x)
  return `${whole}%`
}

/** "p = 0.0004", "p = 0.03", "p < 0.0001", as the server's verdicts write it. */
export function formatP(p: number | null | undefined): string {
  if (typeof p !== 'number' || !Number.isFinite(p)) return 'p = —'
  if (p < 1e-4) return 'p < 0.0001'
  if (p >= 0.01) return `p = ${p.toFixed(2)}`
  return p >= 1e-3 ? `p = ${Number(p.toPrecision(1))}` : `p = ${p.toFixed(4)}`
}

/** Which way a comparison went: B (the candidate) better, A better, or no significant difference. */
export function verdictSide(c: Pick<EvalComparison, 'significant' | 'win_rate'>): 'b' | 'a' | 'none' {
  if (!c.significant || c.win_rate === null) return 'none'
  return c.win_rate < 0.5 ? 'a' : 'b'
}

/** B's wins, the ties and B's losses as shares of the prompts (0 to 1 each). */
export function outcomeShares(c: Pick<EvalComparison, 'wins' | 'ties' | 'losses'>): { wins: number; ties: number; losses: number } {
  const n = c.wins + c.ties + c.losses
  if (n <= 0) return { wins: 0, ties: 0, losses: 0 }
  return { wins: c.wins / n, ties: c.ties / n, losses: c.losses / n }
}

/** A share as a position on a 0–100% axis: "37.5%", clamped to the axis. */
export function axisPosition(value: number | null | undefined): string {
  const v = typeof value === 'number' && Number.isFinite(value) ? Math.min(1, Math.max(0, value)) : 0
  return `${Number((v * 100).toFixed(2))}%`
}

export type Tone = 'best' | 'worst' | null

/** Where the models' scores on a prompt differ: the best answers and the worst (a missing score
 * is the worst, as the server counts it); nothing where they agree. */
export function answerTones(row: Pick<EvalSampleRow, 'answers'>): Tone[] {
  const scores = row.answers.map((a) => (typeof a.score === 'number' && Number.isFinite(a.score) ? a.score : -Infinity))
  const best = Math.max(...scores)
  const worst = Math.min(...scores)
  if (scores.length < 2 || best === worst) return scores.map(() => null)
  return scores.map((s) => (s === best ? 'best' : s === worst ? 'worst' : null))
}

/** The samples browser's orders, as it names them. */
export type SampleOrder = 'index' | 'worst' | 'best' | 'spread'
export type SampleFilter = 'all' | 'disagree' | 'agree'

/** The GET /evaluation query for the browser's order, model, filter and page. */
export function evaluationQuery(order: SampleOrder, model: string | null, filter: SampleFilter, offset: number, limit: number): EvaluationQuery {
  const sort: EvaluationQuery =
    order === 'worst' || order === 'best'
      ? { order: order === 'worst' ? 'score' : '-score', ...(model ? { model } : {}) }
      : { order: order === 'spread' ? '-spread' : 'index' }
  const disagree = filter === 'all' ? {} : { disagree: filter === 'disagree' }
  return { ...sort, ...disagree, offset, limit }
}

/** Each model's library id by its name in the results (models without one are left out). */
export function libraryIds(models: readonly Pick<EvalModelFigures, 'name' | 'id'>[]): Map<string, string> {
  return new Map(models.flatMap((m) => (m.id ? [[m.name, m.id] as [string, string]] : [])))
}

/** A score or an NLL for a table: 3 significant digits; "—" when unknown. */
export function formatScore(value: number | null | undefined): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—'
  if (value === 0) return '0'
  if (Math.abs(value) < 1e-3) return value.toExponential(2)
  return Number(value.toPrecision(3)).toString()
}

/** "[0.05, 0.16]"; "" when there is no interval. */
export function intervalText(interval: readonly [number, number] | null | undefined, format: (v: number) => string = formatScore): string {
  return interval ? `[${format(interval[0])}, ${format(interval[1])}]` : ''
}
