import { describe, expect, test } from 'vitest'
import { blindOutcome, compareNames, countOutcomes, moreNeeded, needLine, outcomesFor, randomOrder, sideAt, sidesInOrder, winnerOf, withOutcome, withoutPair, type Outcome, type Tallies } from './blind'

describe('blind A/B judging', () => {
  test('the order is random per prompt; a position names its model', () => {
    expect(randomOrder(() => 0.2)).toBe('ab')
    expect(randomOrder(() => 0.7)).toBe('ba')
    expect([sideAt('ab', 1), sideAt('ab', 2), sideAt('ba', 1), sideAt('ba', 2)]).toEqual(['a', 'b', 'b', 'a'])
    expect(sidesInOrder('ba')).toEqual(['b', 'a'])
  })

  test("a choice is de-randomised into B's outcome: 1 B better, 0 tie, -1 A better", () => {
    // Answer 1 was A's: picking it is a loss for B.
    expect(blindOutcome('first', 'ab')).toBe(-1)
    expect(blindOutcome('second', 'ab')).toBe(1)
    // Answer 1 was B's.
    expect(blindOutcome('first', 'ba')).toBe(1)
    expect(blindOutcome('second', 'ba')).toBe(-1)
    expect(blindOutcome('tie', 'ab')).toBe(0)
    expect(blindOutcome('tie', 'ba')).toBe(0)
    expect(winnerOf('first', 'ba')).toBe('b')
    expect(winnerOf('tie', 'ab')).toBeNull()
  })

  test('the tally is per pair, whichever model is A: swapped, it reads negated', () => {
    let t: Tallies = {}
    const add = (a: string, b: string, ...os: Outcome[]) => { for (const o of os) t = withOutcome(t, a, b, o) }
    add('mdl_1', 'mdl_2', 1, 1, 0, -1)
    add('thinker/tiny', 'mdl_1', -1)
    expect(outcomesFor(t, 'mdl_1', 'mdl_2')).toEqual([1, 1, 0, -1])
    expect(outcomesFor(t, 'mdl_2', 'mdl_1')).toEqual([-1, -1, 0, 1])
    add('mdl_2', 'mdl_1', 1)
    expect(outcomesFor(t, 'mdl_1', 'mdl_2')).toEqual([1, 1, 0, -1, -1])
    expect(outcomesFor(t, 'mdl_1', 'thinker/tiny')).toEqual([1])
    expect(countOutcomes(outcomesFor(t, 'mdl_1', 'mdl_2'))).toEqual({ wins: 2, ties: 1, losses: 2, decided: 4 })
    t = withoutPair(t, 'mdl_2', 'mdl_1')
    expect(outcomesFor(t, 'mdl_1', 'mdl_2')).toEqual([])
    expect(outcomesFor(t, 'thinker/tiny', 'mdl_1')).toEqual([-1])
  })

  test('how many more decided prompts: needed minus those decided so far', () => {
    expect(moreNeeded({ needed: 40, wins: 7, losses: 3 })).toBe(30)
    expect(needLine({ needed: 40, wins: 7, losses: 3 })).toBe('about 30 more decided prompts for a reliable answer')
    expect(needLine({ needed: 11, wins: 7, losses: 3 })).toBe('about 1 more decided prompt for a reliable answer')
    expect(needLine({ needed: 8, wins: 7, losses: 3 })).toMatch(/^enough decided prompts/)
    expect(moreNeeded({ needed: null, wins: 3, losses: 0 })).toBeNull()
    expect(needLine({ needed: null, wins: 0, losses: 0 })).toMatch(/only ties/)
    expect(needLine({ needed: null, wins: 3, losses: 0 })).toMatch(/went one way/)
    expect(needLine({ needed: null, wins: 4, losses: 4 })).toMatch(/evenly split/)
    expect(needLine({ needed: null, wins: 501, losses: 499 })).toMatch(/too close to call/)
  })

  test('the verdict names the models, told apart when named alike', () => {
    expect(compareNames('sums-sl', 'sums-sl+feedback')).toEqual({ a: 'sums-sl', b: 'sums-sl+feedback' })
    expect(compareNames('run', 'run')).toEqual({ a: 'run (A)', b: 'run (B)' })
  })
})
