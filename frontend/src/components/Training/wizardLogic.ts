// The wizard's arithmetic, kept pure so it is tested on its own: defaults from the dataset's
// size (TRAINING_GUIDE.md "Hyperparameters" tables) and the estimate of steps and time.
import type { Algorithm } from './algorithms'

/** Rows left for training after the server holds out eval_fraction (data/loading.py). */
export function trainRows(rows: number, evalFraction = 0.1): number {
  if (rows < 2 || evalFraction <= 0) return rows
  const held = Math.min(rows - 1, Math.max(1, Math.round(rows * evalFraction)))
  return rows - held
}

export type SizeClass = 'small' | 'medium' | 'large'
export function sizeClass(rows: number): SizeClass {
  return rows < 1000 ? 'small' : rows <= 10000 ? 'medium' : 'large'
}

const pow2Floor = (n: number) => 2 ** Math.floor(Math.log2(Math.max(1, n)))
const clamp = (n: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, n))

/** Learning rates: the shipped tiny examples for the random thinker/tiny, the guide otherwise. */
function learningRate(algorithm: 'sl' | 'dpo' | 'rl' | 'rm', baseModel: string): number {
  const tiny = baseModel === 'thinker/tiny'
  switch (algorithm) {
    case 'sl':
      return tiny ? 3e-3 : 3e-4
    case 'dpo':
      return tiny ? 1e-3 : 1e-5
    case 'rm':
      return tiny ? 3e-3 : 3e-4
    case 'rl':
      return tiny ? 3e-4 : 2e-5
  }
}

/** About ten evaluations and five checkpoints per run, never 0 (0 means "only at the end"). */
function cadence(steps: number): { eval_every: number; save_every: number } {
  return { eval_every: Math.max(1, Math.round(steps / 10)), save_every: Math.max(1, Math.round(steps / 5)) }
}

export interface StagePlan {
  stage: 'sl' | 'dpo' | 'rl' | 'rm'
  rows: number
  trainRows: number
  steps: number
  config: Record<string, number | string>
  /** One line per choice: why this value. */
  why: string[]
}

function supervised(stage: 'sl' | 'dpo' | 'rm', rows: number, baseModel: string): StagePlan {
  const train = trainRows(rows)
  const size = sizeClass(rows)
  const unit = stage === 'sl' ? 'examples' : 'pairs'
  const cap = size === 'small' ? (stage === 'sl' ? 32 : 16) : size === 'medium' ? 64 : 128
  const batch = clamp(pow2Floor(train / 4), 1, cap)
  const epochs = size === 'small' ? 3 : size === 'medium' ? 2 : 1
  const perEpoch = Math.max(1, Math.floor(train / batch))
  const steps = epochs * perEpoch
  return {
    stage, rows, trainRows: train, steps,
    config: {
      batch_size: batch,
      num_epochs: epochs,
      max_steps: steps,
      learning_rate: learningRate(stage, baseModel),
      ...cadence(steps),
    },
    why: [
      `${rows} ${unit}, ${train} to train on after 10% is held out for evaluation`,
      `batch ${batch}: about a quarter of the data per step, at most ${cap} for a ${size} set`,
      `${epochs} epoch${epochs > 1 ? 's' : ''} × ${perEpoch} steps = ${steps} steps`,
    ],
  }
}

function reinforcement(rows: number, baseModel: string, judge: boolean): StagePlan {
  const train = trainRows(rows)
  const size = sizeClass(rows)
  // Judge calls grow as n(n−1) per group, so RLHF keeps the cookbook's groups of 4.
  const group = judge ? 4 : size === 'small' ? 8 : 16
  const groups = clamp(pow2Floor(train / 4), 1, size === 'small' ? 16 : size === 'medium' ? 32 : 64)
  const passes = size === 'small' ? 3 : size === 'medium' ? 2 : 1
  const steps = Math.max(1, Math.ceil((passes * train) / groups))
  return {
    stage: 'rl', rows, trainRows: train, steps,
    config: {
      group_size: group,
      groups_per_batch: groups,
      max_steps: steps,
      learning_rate: learningRate('rl', baseModel),
      eval_every: Math.max(1, Math.round(steps / 4)),
      save_every: Math.max(1, Math.round(steps / 4)),
    },
    why: [
      `${rows} prompts, ${train} to train on after 10% is held out`,
      `${groups} prompts per step × ${group} completions each = ${groups * group} samples per step`,
      `${passes} pass${passes > 1 ? 'es' : ''} over the prompts = ${steps} steps`,
    ],
  }
}

/** The user's edits to a stage. Supervised stages recompute their steps (and, unless set,
 * their cadence) from batch size and epochs, so the review's estimate stays true. */
export function applyOverrides(plan: StagePlan, overrides: Readonly<Record<string, number>>): StagePlan {
  const config = { ...plan.config, ...overrides }
  let steps = plan.steps
  if (plan.stage === 'rl') {
    steps = Number(config.max_steps)
  } else if ('batch_size' in overrides || 'num_epochs' in overrides) {
    const perEpoch = Math.max(1, Math.floor(plan.trainRows / Number(config.batch_size)))
    steps = Number(config.num_epochs) * perEpoch
    config.max_steps = steps
    const c = cadence(steps)
    if (!('eval_every' in overrides)) config.eval_every = c.eval_every
    if (!('save_every' in overrides)) config.save_every = c.save_every
  }
  return { ...plan, config, steps }
}

/** Rebuild a plan's totals and request config after some stages changed. */
export function planOf(stages: StagePlan[], rlhf: boolean): Plan {
  const totalSteps = stages.reduce((n, s) => n + s.steps, 0)
  if (rlhf) {
    const [sl, rm, rl] = stages
    return { stages, totalSteps, config: { sl: sl.config, rm: rm.config, rl: rl.config } }
  }
  return { stages, totalSteps, config: stages[0].config }
}

export interface Sizes {
  /** SL demonstrations, DPO pairs or RL prompts; for RLHF the demonstrations. */
  main: number
  /** RLHF only: preference pairs and RL prompts. */
  pairs?: number
  prompts?: number
}

export interface Plan {
  stages: StagePlan[]
  totalSteps: number
  /** The job request's config. */
  config: Record<string, unknown>
}

export function suggestPlan(algorithm: Algorithm, sizes: Sizes, baseModel: string): Plan {
  if (algorithm === 'rlhf') {
    const sl = supervised('sl', sizes.main, baseModel)
    const rm = supervised('rm', sizes.pairs ?? 0, baseModel)
    const rl = reinforcement(sizes.prompts ?? 0, baseModel, true)
    return planOf([sl, rm, rl], true)
  }
  const plan = algorithm === 'rl' ? reinforcement(sizes.main, baseModel, false) : supervised(algorithm, sizes.main, baseModel)
  return planOf([plan], false)
}

/** Seconds per step, measured (this server's earlier jobs) or documented (TRAINING_GUIDE.md). */
export interface Pace {
  secondsPerStep: number
  basis: string
}

/** thinker/tiny on a 2-core CPU, from TRAINING_GUIDE.md "What the shipped examples achieve". */
const DOCUMENTED: Record<'sl' | 'dpo' | 'rl' | 'rm', Pace> = {
  sl: { secondsPerStep: 0.05, basis: 'thinker/tiny on a 2-core CPU: 250 SL steps in about 12 s (TRAINING_GUIDE.md)' },
  dpo: { secondsPerStep: 0.4, basis: 'thinker/tiny on a 2-core CPU: 40 DPO steps in about 15 s (TRAINING_GUIDE.md)' },
  rm: { secondsPerStep: 0.4, basis: 'thinker/tiny on a 2-core CPU: 80 judge steps in about 30 s (TRAINING_GUIDE.md)' },
  rl: { secondsPerStep: 3, basis: 'thinker/tiny on a 2-core CPU: 15 RL steps in about 45 s (TRAINING_GUIDE.md)' },
}

export function documentedPace(stage: 'sl' | 'dpo' | 'rl' | 'rm', baseModel: string, backend: string): Pace | null {
  return baseModel === 'thinker/tiny' && backend === 'local' ? DOCUMENTED[stage] : null
}

/** Median seconds per step of a finished job's metrics rows: the measured pace. */
export function measuredPace(rows: readonly Record<string, unknown>[], jobName: string): Pace | null {
  const times = rows.map((r) => r.step_time_s).filter((t): t is number => typeof t === 'number' && t > 0)
  if (times.length < 3) return null
  const s = [...times].sort((a, b) => a - b)
  const median = s[Math.floor(s.length / 2)]
  return { secondsPerStep: median, basis: `measured on this server: median of ${times.length} steps of job "${jobName}"` }
}

export interface Estimate {
  seconds: number | null
  basis: string
}

/** Time for the plan: each stage's steps × its pace; unknown if any stage has none. */
export function estimateTime(plan: Plan, paces: readonly (Pace | null)[]): Estimate {
  let seconds = 0
  const bases: string[] = []
  for (let i = 0; i < plan.stages.length; i++) {
    const pace = paces[i]
    if (!pace) return { seconds: null, basis: 'unknown until the first steps: no measurement for this model and backend yet' }
    seconds += plan.stages[i].steps * pace.secondsPerStep
    bases.push(`${plan.stages[i].steps} steps × ${pace.secondsPerStep.toPrecision(2)} s (${pace.basis})`)
  }
  return { seconds, basis: bases.join('; ') }
}

/** "45 s", "3 min 20 s", "1 h 05 min". */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—'
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`
}
