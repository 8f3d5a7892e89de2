import { describe, expect, test } from 'vitest'
import {
  answerTones,
  axisPosition,
  evalModelLabels,
  evaluationQuery,
  formatP,
  formatScore,
  intervalText,
  isEvalJob,
  libraryIds,
  outcomeShares,
  ratePercent,
  trainsNothing,
  verdictSide,
  type EvalAnswer,
} from './evaluation'

const answer = (model: string, score: number | null): EvalAnswer => ({ model, score, nll: null })

describe('an eval job', () => {
  test('trains nothing, as a batch job', () => {
    expect(isEvalJob({ algorithm: 'eval' })).toBe(true)
    expect(isEvalJob({ algorithm: 'batch' })).toBe(false)
    expect(trainsNothing({ algorithm: 'eval' })).toBe(true)
    expect(trainsNothing({ algorithm: 'batch' })).toBe(true)
    expect(trainsNothing({ algorithm: 'sl' })).toBe(false)
  })

  test('nor does a review; an rm job and an SDK run train', () => {
    expect(trainsNothing({ algorithm: 'review' })).toBe(true)
    expect(trainsNothing({ algorithm: 'rm' })).toBe(false)
    expect(trainsNothing({ algorithm: 'tinker_sdk' })).toBe(false)
  })

  test('its models as the server resolved them: the baseline first, each by its label', () => {
    const config = {
      models: [{ model: 'thinker/tiny' }, { model: '/srv/runs/job_1/sampler_weights/000100', name: 'arith-sl@100', id: 'mdl_1' }, 'Qwen/Qwen3-0.6B'],
      max_tokens: 16,
    }
    expect(evalModelLabels(config)).toEqual(['thinker/tiny', 'arith-sl@100', 'Qwen/Qwen3-0.6B'])
    expect(evalModelLabels({})).toEqual([])
    expect(evalModelLabels(null)).toEqual([])
  })
})

describe('the figures as the server words them', () => {
  test('p-values as the verdicts write them (significance.format_p)', () => {
    expect(formatP(0.00004)).toBe('p < 0.0001')
    expect(formatP(0.0004)).toBe('p = 0.0004')
    expect(formatP(0.0034)).toBe('p = 0.003')
    expect(formatP(0.03125)).toBe('p = 0.03')
    expect(formatP(0.62)).toBe('p = 0.62')
    expect(formatP(1)).toBe('p = 1.00')
    expect(formatP(null)).toBe('p = —')
  })

  test('win rates rounded half to even, as the verdicts round them', () => {
    expect(ratePercent(0.965)).toBe('96%') // "96% win rate" in the verdict, not 97%
    expect(ratePercent(0.975)).toBe('98%')
    expect(ratePercent(0.64)).toBe('64%')
    expect(ratePercent(0)).toBe('0%')
    expect(ratePercent(1)).toBe('100%')
    expect(ratePercent(null)).toBe('—')
  })

  test('scores and intervals: 3 significant digits', () => {
    expect(formatScore(-0.07600000000000001)).toBe('-0.076')
    expect(formatScore(5.957544043707469)).toBe('5.96')
    expect(formatScore(0)).toBe('0')
    expect(formatScore(null)).toBe('—')
    expect(formatScore(Number.NaN)).toBe('—')
    expect(intervalText([0.05, 0.16])).toBe('[0.05, 0.16]')
    expect(intervalText(null)).toBe('')
  })
})

describe('a comparison', () => {
  test('which way it went: B better, A better, or no significant difference', () => {
    expect(verdictSide({ significant: true, win_rate: 0.64 })).toBe('b')
    expect(verdictSide({ significant: true, win_rate: 0.47 })).toBe('a')
    expect(verdictSide({ significant: false, win_rate: 0.64 })).toBe('none')
    expect(verdictSide({ significant: true, win_rate: null })).toBe('none')
  })

  test('wins, ties and losses as shares of the prompts', () => {
    expect(outcomeShares({ wins: 95, ties: 3, losses: 2 })).toEqual({ wins: 0.95, ties: 0.03, losses: 0.02 })
    expect(outcomeShares({ wins: 0, ties: 0, losses: 0 })).toEqual({ wins: 0, ties: 0, losses: 0 })
  })

  test('a position on the 0–100% axis, clamped', () => {
    expect(axisPosition(0.5)).toBe('50%')
    expect(axisPosition(0.375)).toBe('37.5%')
    expect(axisPosition(1.2)).toBe('100%')
    expect(axisPosition(-0.1)).toBe('0%')
    expect(axisPosition(null)).toBe('0%')
  })
})

describe('the prompts', () => {
  test('where the scores differ, the best and the worst answers are marked; a missing score is the worst', () => {
    expect(answerTones({ answers: [answer('a', 0), answer('b', 1)] })).toEqual(['worst', 'best'])
    expect(answerTones({ answers: [answer('a', -0.1), answer('b', 1), answer('c', 0)] })).toEqual(['worst', 'best', null])
    expect(answerTones({ answers: [answer('a', 1), answer('b', 1), answer('c', null)] })).toEqual(['best', 'best', 'worst'])
    expect(answerTones({ answers: [answer('a', 1), answer('b', 1)] })).toEqual([null, null])
    expect(answerTones({ answers: [answer('a', 1)] })).toEqual([null])
  })

  test('the browser\'s order, model, filter and page as the server\'s query', () => {
    expect(evaluationQuery('index', null, 'all', 0, 50)).toEqual({ order: 'index', offset: 0, limit: 50 })
    expect(evaluationQuery('worst', 'sl@100', 'all', 0, 50)).toEqual({ order: 'score', model: 'sl@100', offset: 0, limit: 50 })
    // no model chosen: the server's default, the last model
    expect(evaluationQuery('best', null, 'disagree', 50, 50)).toEqual({ order: '-score', disagree: true, offset: 50, limit: 50 })
    expect(evaluationQuery('spread', 'sl@100', 'agree', 0, 50)).toEqual({ order: '-spread', disagree: false, offset: 0, limit: 50 })
  })

  test('library models link to their page by name', () => {
    const ids = libraryIds([{ name: 'thinker/tiny', id: null }, { name: 'arith-sl@100', id: 'mdl_1' }])
    expect([...ids]).toEqual([['arith-sl@100', 'mdl_1']])
  })
})
