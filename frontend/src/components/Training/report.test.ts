import { describe, expect, test } from 'vitest'
import { reportOf } from './contract'
import { formatMetric, shortMetric, verdictLine } from './report'
import { report } from './testing'

const metric = (value: number | null, base: number | null) => ({ name: 'exact_match', label: 'held-out exact match', value, base, higher_is_better: true })

describe('a report in plain words', () => {
  test('learned and not learned, against the base model', () => {
    expect(verdictLine(reportOf({ report: report() })!)).toBe('Learned: held-out exact match 0.68 vs 0.00 for the base model')
    expect(verdictLine(reportOf({ report: report({ verdict: 'not_learned', metric: metric(0.02, 0.03) }) })!)).toBe(
      'Did not learn: held-out exact match 0.02 vs 0.03 for the base model',
    )
    expect(verdictLine(reportOf({ report: report({ metric: metric(0.5, null) }) })!)).toBe(
      'Learned: held-out exact match 0.50 (the base model was not measured)',
    )
  })

  test('a report that could not be computed: no metric, its warning says why', () => {
    const failed = { verdict: 'unknown', metric: null, held_out: null, base: null, samples: [], warnings: [{ code: 'report_failed', message: 'The report could not be computed.', cause: 'OSError', fix: 'Try the model in the playground.' }] }
    const r = reportOf({ report: failed })
    expect(r?.held_out).toEqual({})
    expect(verdictLine(r!)).toBe('Not measured: The report could not be computed.')
    expect(shortMetric(r!.metric)).toBe('not measured')
    expect(reportOf({ report: null })).toBeNull()
  })

  test('the job list cell and numbers', () => {
    expect(shortMetric(metric(0.68, 0))).toBe('exact match 0.68 (base 0.00)')
    expect(shortMetric({ ...metric(1.234, null), label: 'held-out mean NLL' })).toBe('mean NLL 1.23')
    expect(formatMetric(123.45)).toBe('123.5')
    expect(formatMetric(null)).toBe('—')
  })
})
