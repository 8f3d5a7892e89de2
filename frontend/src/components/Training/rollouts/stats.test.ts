// The step's numbers: histogram bins, per-episode mean gap, and what a run without episodes has.
import { describe, expect, test } from 'vitest'
import { histogram, meanGap, stepNumbers } from './stats'
import { oldLine, stepLines, tok } from './testing'
import { parseGroups, type Episode } from './types'

const episode = (tokens: Episode['tokens']): Episode => ({ turns: [], tokens, truncated: false, version: 0, reward: 0, advantage: 0 })

describe('step numbers', () => {
  test('histogram: equal-width bins over the range, the maximum in the last bin', () => {
    expect(histogram([0, 1, 1, 2, 4], 4)).toEqual([
      { lo: 0, hi: 1, count: 1 }, { lo: 1, hi: 2, count: 2 }, { lo: 2, hi: 3, count: 1 }, { lo: 3, hi: 4, count: 1 },
    ])
    expect(histogram([0.5, 0.5, 0.5])).toEqual([{ lo: 0.5, hi: 0.5, count: 3 }])
    expect(histogram([Number.NaN])).toEqual([])
  })

  test('mean gap: log q − log p averaged over the trained tokens; none for an untrained episode', () => {
    // (0 − (−0.5) + (−1 − (−0.75))) / 2 = (0.5 − 0.25) / 2
    expect(meanGap(episode([tok('a', 0, -0.5), tok('b', -1, -0.75)]))).toBe(0.125)
    expect(meanGap(episode([tok('a', -1, null)]))).toBeNull()
  })

  test('a step: rewards per completion, tokens per episode, gaps of the trained episodes', () => {
    const n = stepNumbers(parseGroups(stepLines()))
    expect(n.rewards).toEqual([1, 0, 1, 0.2, 0, 0, 0.5, 0.5])
    expect(n.lengths).toEqual([2, 4, 5, 2, 1, 1, 2, 2])
    expect(n.lengthUnit).toBe('tokens')
    expect(n.gaps).toHaveLength(6)
    expect(n.truncated).toBe(1)
    expect(n.versions).toEqual([2, 3])
  })

  test('a run without episodes: lengths in characters, no gaps', () => {
    const n = stepNumbers(parseGroups([oldLine()]))
    expect(n.lengths).toEqual([3, 4])
    expect(n.lengthUnit).toBe('characters')
    expect(n.gaps).toEqual([])
    expect(n.versions).toEqual([])
  })
})
