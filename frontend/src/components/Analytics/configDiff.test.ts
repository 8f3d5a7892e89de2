import { describe, expect, test } from 'vitest'
import { diffConfigs, flatten } from './configDiff'
import { finalEval, mergeSeries } from './metrics'

describe('config diff', () => {
  test('nested settings flatten to dotted keys', () => {
    expect(flatten({ lr: 0.001, rm: { beta: 0.1, data: { id: 'ds_1' } }, tags: ['a'], none: null })).toEqual({
      lr: '0.001', 'rm.beta': '0.1', 'rm.data.id': 'ds_1', tags: '["a"]', none: 'null',
    })
  })

  test('keys are the union, sorted; a differing or missing value is a difference', () => {
    const rows = diffConfigs([
      { learning_rate: 0.003, batch_size: 32, rm: { beta: 0.1 } },
      { learning_rate: 0.001, batch_size: 32, rm: { beta: 0.1 }, seed: 1 },
    ])
    expect(rows).toEqual([
      { key: 'batch_size', values: ['32', '32'], differs: false },
      { key: 'learning_rate', values: ['0.003', '0.001'], differs: true },
      { key: 'rm.beta', values: ['0.1', '0.1'], differs: false },
      { key: 'seed', values: [undefined, '1'], differs: true },
    ])
  })

  test('one config alone has no differences', () => {
    expect(diffConfigs([{ a: 1 }]).every((r) => !r.differs)).toBe(true)
  })
})

describe('run metrics', () => {
  const rows = [
    { step: 1, time: 5, train_mean_nll: 6 },
    { step: 2, train_mean_nll: 4, eval_mean_nll: 4.5 },
    { step: 3, train_mean_nll: 2, eval_mean_nll: 2.5, exact_match: 0.9 },
  ]
  test('series merge by step under each run id', () => {
    expect(mergeSeries([{ id: 'a', rows }, { id: 'b', rows: [{ step: 2, train_mean_nll: 5 }] }], 'train_mean_nll')).toEqual([
      { step: 1, a: 6 }, { step: 2, a: 4, b: 5 }, { step: 3, a: 2 },
    ])
  })
  test('evaluation results are the last eval values', () => {
    expect(finalEval(rows)).toEqual({ eval_mean_nll: 2.5, exact_match: 0.9 })
  })
})
