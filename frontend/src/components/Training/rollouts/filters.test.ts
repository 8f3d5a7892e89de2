// The filters on a step larger than "highest" and "lowest" show.
import { describe, expect, test } from 'vitest'
import { applyFilter, filterCount, TOP_N } from './filters'
import { parseGroups } from './types'

const group = (rewards: number[]) => ({ prompt: 'p', completions: rewards.map(String), rewards, advantages: rewards.map(() => 0) })

describe('filters', () => {
  test(`highest and lowest reward: the ${TOP_N} extreme completions, ties in step order`, () => {
    const groups = parseGroups([group([1, 2, 3, 4]), group([9, 8, 7, 6]), group([5, 5, 0, 10])])
    const best = applyFilter(groups, 'highest')
    expect(best.map((s) => [s.index, s.rows])).toEqual([[2, [3, 0, 1]], [1, [0, 1, 2, 3]], [0, [3, 2, 1]]])
    expect(filterCount(groups, 'highest')).toBe(TOP_N)
    const worst = applyFilter(groups, 'lowest')
    expect(worst.map((s) => [s.index, s.rows])).toEqual([[2, [2, 0, 1]], [0, [0, 1, 2, 3]], [1, [3, 2, 1]]])
  })

  test('zero advantage needs advantages: a group with none is not one', () => {
    const groups = parseGroups([{ prompt: 'p', completions: [], rewards: [], advantages: [] }])
    expect(applyFilter(groups, 'zero_advantage')).toEqual([])
    expect(applyFilter(groups, 'all')).toHaveLength(1)
  })
})
