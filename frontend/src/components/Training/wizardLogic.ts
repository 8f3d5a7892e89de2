// The wizard's own arithmetic, kept pure so it is tested on its own: the time estimate (steps
// from the server's proposal × a measured or documented pace) and a job's default name.

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

/** Time for the stages: each one's steps × its pace; unknown if any stage has none. */
export function estimateTime(stages: readonly { steps: number }[], paces: readonly (Pace | null)[]): Estimate {
  let seconds = 0
  const bases: string[] = []
  for (let i = 0; i < stages.length; i++) {
    const pace = paces[i]
    if (!pace) return { seconds: null, basis: 'unknown until the first steps: no measurement for this model and backend yet' }
    seconds += stages[i].steps * pace.secondsPerStep
    bases.push(`${stages[i].steps} steps × ${pace.secondsPerStep.toPrecision(2)} s (${pace.basis})`)
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

/** "<dataset>-<algorithm>-<MMDD-HHmm>": two wizard jobs on one dataset get different names. */
export function defaultJobName(dataset: string, algorithm: string, at: Date): string {
  const two = (n: number) => String(n).padStart(2, '0')
  const stamp = `${two(at.getMonth() + 1)}${two(at.getDate())}-${two(at.getHours())}${two(at.getMinutes())}`
  return `${dataset}-${algorithm}-${stamp}`
}
