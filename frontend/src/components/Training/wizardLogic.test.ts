import { describe, expect, test } from 'vitest'
import { applyOverrides, estimateTime, formatDuration, measuredPace, suggestPlan, trainRows } from './wizardLogic'

describe('defaults from the dataset size', () => {
  test('held-out rows follow the server: round(10%), at least 1', () => {
    expect(trainRows(100)).toBe(90)
    expect(trainRows(5)).toBe(4)
    expect(trainRows(1)).toBe(1)
  })

  test('a small SL set: batch a quarter of the data, 3 epochs, ~10 evals and ~5 checkpoints', () => {
    const plan = suggestPlan('sl', { main: 100 }, 'thinker/tiny')
    const c = plan.stages[0].config
    expect(c.batch_size).toBe(16)
    expect(c.num_epochs).toBe(3)
    expect(plan.totalSteps).toBe(15) // 3 × floor(90 / 16)
    expect(c.max_steps).toBe(15)
    expect(c.eval_every).toBe(2)
    expect(c.save_every).toBe(3)
    expect(c.learning_rate).toBe(3e-3) // the shipped tiny examples, not a real model's
  })

  test('larger sets get bigger batches and fewer epochs', () => {
    const medium = suggestPlan('sl', { main: 5000 }, 'Qwen/Qwen3-8B').stages[0]
    expect(medium.config.batch_size).toBe(64)
    expect(medium.config.num_epochs).toBe(2)
    expect(medium.config.learning_rate).toBe(3e-4)
    const large = suggestPlan('dpo', { main: 50_000 }, 'Qwen/Qwen3-8B').stages[0]
    expect(large.config.batch_size).toBe(128)
    expect(large.config.num_epochs).toBe(1)
    expect(large.steps).toBe(Math.floor(45_000 / 128))
  })

  test('RL: prompts per step and passes over the prompts', () => {
    const plan = suggestPlan('rl', { main: 80 }, 'thinker/tiny')
    const c = plan.stages[0].config
    expect(c.group_size).toBe(8)
    expect(c.groups_per_batch).toBe(16)
    expect(plan.totalSteps).toBe(Math.ceil((3 * 72) / 16))
  })

  test('RLHF plans three stages from three sizes, judge groups of 4', () => {
    const plan = suggestPlan('rlhf', { main: 300, pairs: 300, prompts: 300 }, 'thinker/tiny')
    expect(plan.stages.map((s) => s.stage)).toEqual(['sl', 'rm', 'rl'])
    expect(plan.stages[2].config.group_size).toBe(4)
    expect(plan.totalSteps).toBe(plan.stages.reduce((n, s) => n + s.steps, 0))
    expect(Object.keys(plan.config)).toEqual(['sl', 'rm', 'rl'])
  })

  test('editing batch size or epochs recomputes the steps', () => {
    const stage = suggestPlan('sl', { main: 100 }, 'thinker/tiny').stages[0]
    const edited = applyOverrides(stage, { batch_size: 8, num_epochs: 2 })
    expect(edited.steps).toBe(2 * Math.floor(90 / 8))
    expect(edited.config.max_steps).toBe(edited.steps)
    expect(applyOverrides(stage, { learning_rate: 1e-3 }).steps).toBe(15)
  })
})

describe('the estimate', () => {
  const plan = suggestPlan('sl', { main: 100 }, 'thinker/tiny')

  test('measured pace: the median step time of an earlier job', () => {
    const rows = [0.5, 0.4, 3.0, 0.6, 0.5].map((t, i) => ({ step: i + 1, step_time_s: t }))
    const pace = measuredPace(rows, 'arith')
    expect(pace?.secondsPerStep).toBe(0.5)
    const est = estimateTime(plan, [pace])
    expect(est.seconds).toBeCloseTo(7.5)
    expect(est.basis).toMatch(/measured on this server/)
  })

  test('too few rows is no measurement; no pace is "unknown until the first steps"', () => {
    expect(measuredPace([{ step: 1, step_time_s: 1 }], 'x')).toBeNull()
    const est = estimateTime(plan, [null])
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
