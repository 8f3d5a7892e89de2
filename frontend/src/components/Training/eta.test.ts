import { describe, expect, test } from 'vitest'
import { recentSecondsPerStep, smoothedEta } from './eta'

const running = (step: number, total = 100) => ({ state: 'running', step, total_steps: total })
// One row per step, `dt` seconds apart after a start at t=1000.
const rows = (times: number[]) => times.map((t, i) => ({ step: i + 1, time: 1000 + t, train_mean_nll: 1 }))

describe('smoothed ETA', () => {
  test('nothing before 3 steps, however fast the first ones were', () => {
    expect(smoothedEta(running(2), rows([0, 1]))).toBeNull()
    expect(smoothedEta({ state: 'paused', step: 50, total_steps: 100 }, rows([0, 1, 2]))).toBeNull()
  })

  test('the average over the last 10 steps: a slow first step (loading, compiling) is forgotten', () => {
    // Step 1 took 60 s; then 2 s per step up to step 20.
    const times = [60, ...Array.from({ length: 19 }, (_, i) => 62 + 2 * i)]
    expect(recentSecondsPerStep(rows(times))).toBeCloseTo(2)
    expect(smoothedEta(running(20), rows(times))).toBeCloseTo(2 * 80)
  })

  test('an evaluation step counts in the average instead of swinging the figure', () => {
    const times = [0, 1, 2, 3, 4, 14, 15, 16, 17, 18, 19] // step 6 evaluated for 9 s
    expect(recentSecondsPerStep(rows(times))).toBeCloseTo(1.9)
  })

  test('rows without wall time: the mean logged step time; RLHF: the stage training now', () => {
    const untimed = [0.5, 0.7, 0.6].map((t, i) => ({ step: i + 1, step_time_s: t }))
    expect(recentSecondsPerStep(untimed)).toBeCloseTo(0.6)
    const rlhf = [
      ...[0, 1, 2, 3].map((t, i) => ({ stage: 'sl', step: i + 1, time: t })),
      ...[10, 40].map((t, i) => ({ stage: 'rl', step: i + 1, time: t })),
    ]
    expect(recentSecondsPerStep(rlhf)).toBeNull() // only 2 RL steps so far
  })

  test('a replayed row does not count twice', () => {
    const replayed = [...rows([0, 2, 4]), { step: 3, time: 1004 }]
    expect(recentSecondsPerStep(replayed)).toBeCloseTo(2)
  })
})
