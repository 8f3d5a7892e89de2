import { describe, expect, test } from 'vitest'
import { defaultJobName, documentedPace, estimateTime, formatDuration, measuredPace } from './wizardLogic'

describe('the estimate', () => {
  // The proposal's stages: only their steps matter here.
  const stages = [{ steps: 15 }]

  test('measured pace: the median step time of an earlier job', () => {
    const rows = [0.5, 0.4, 3.0, 0.6, 0.5].map((t, i) => ({ step: i + 1, step_time_s: t }))
    const pace = measuredPace(rows, 'arith')
    expect(pace?.secondsPerStep).toBe(0.5)
    const est = estimateTime(stages, [pace])
    expect(est.seconds).toBeCloseTo(7.5)
    expect(est.basis).toMatch(/measured on this server/)
  })

  test('several stages add up; the documented pace is for thinker/tiny on the local backend only', () => {
    const sl = documentedPace('sl', 'thinker/tiny', 'local')
    const rl = documentedPace('rl', 'thinker/tiny', 'local')
    expect(estimateTime([{ steps: 100 }, { steps: 10 }], [sl, rl]).seconds).toBeCloseTo(100 * 0.05 + 10 * 3)
    expect(documentedPace('sl', 'Qwen/Qwen3-0.6B', 'local')).toBeNull()
    expect(documentedPace('sl', 'thinker/tiny', 'tinker')).toBeNull()
  })

  test('too few rows is no measurement; no pace is "unknown until the first steps"', () => {
    expect(measuredPace([{ step: 1, step_time_s: 1 }], 'x')).toBeNull()
    const est = estimateTime(stages, [null])
    expect(est.seconds).toBeNull()
    expect(est.basis).toMatch(/unknown until the first steps/)
  })

  test('durations read naturally', () => {
    expect(formatDuration(12.4)).toBe('12 s')
    expect(formatDuration(200)).toBe('3 min 20 s')
    expect(formatDuration(3900)).toBe('1 h 05 min')
    expect(formatDuration(null)).toBe('—')
  })
})

describe('default job names', () => {
  test('dataset, algorithm and the minute, so two runs on one dataset differ', () => {
    expect(defaultJobName('arithmetic', 'sl', new Date(2026, 0, 5, 9, 7))).toBe('arithmetic-sl-0105-0907')
    expect(defaultJobName('arithmetic', 'sl', new Date(2026, 11, 31, 23, 59))).toBe('arithmetic-sl-1231-2359')
  })
})
