// A steady ETA for a running job: the wall time per step over its last ~10 steps (evaluations
// and checkpoints included) × the steps left, and none before 3 steps. The server's figure
// (time since start ÷ steps) counts the model's loading, so it swings from minutes to seconds.

const WINDOW = 10
const MIN_STEPS = 3

interface Point {
  step: number
  time: number | null
  stepTime: number | null
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

/** The rows of the stage training now (the last one seen; RLHF rows carry `stage`), one per
 * step, in step order. */
function currentStage(rows: readonly Record<string, unknown>[]): Point[] {
  let stage: string | null = null
  let points = new Map<number, Point>()
  for (const r of rows) {
    const step = num(r.step)
    if (step === null) continue
    if (typeof r.stage === 'string' && r.stage !== stage) {
      if (stage !== null) points = new Map()
      stage = r.stage
    }
    const before = points.get(step)
    points.set(step, { step, time: num(r.time) ?? before?.time ?? null, stepTime: num(r.step_time_s) ?? before?.stepTime ?? null })
  }
  return [...points.values()].sort((a, b) => a.step - b.step)
}

/** Seconds per step lately: wall time across the window, else the mean logged step time. */
export function recentSecondsPerStep(rows: readonly Record<string, unknown>[]): number | null {
  const points = currentStage(rows)
  if (points.length < MIN_STEPS) return null
  const window = points.slice(-(WINDOW + 1))
  const first = window[0]
  const last = window[window.length - 1]
  if (first.time !== null && last.time !== null && last.step > first.step && last.time >= first.time) {
    return (last.time - first.time) / (last.step - first.step)
  }
  const times = window.map((p) => p.stepTime).filter((t): t is number => t !== null)
  return times.length >= MIN_STEPS ? times.reduce((a, b) => a + b, 0) / times.length : null
}

/** Seconds left, or null: not running, fewer than 3 steps, or no total yet. */
export function smoothedEta(
  job: { state: string; step: number; total_steps: number | null },
  rows: readonly Record<string, unknown>[],
): number | null {
  if (job.state !== 'running' || !job.total_steps || job.step < MIN_STEPS) return null
  const pace = recentSecondsPerStep(rows)
  return pace === null ? null : Math.max(0, pace * (job.total_steps - job.step))
}
