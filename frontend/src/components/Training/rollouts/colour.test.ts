// The token colour scales: fixed ends, clamping, the gap's two hues, and no value, no colour.
import { describe, expect, test } from 'vitest'
import { colourOf, gap, gradientOf, tokenDetails, tokenValue } from './colour'
import { tok } from './testing'

describe('token colours', () => {
  test('logprob runs red (≤ −5) through amber (−2.5) to teal (0), clamped', () => {
    expect(colourOf(-5, 'logprob')).toBe('rgba(239, 68, 68, 0.6)')
    expect(colourOf(-50, 'logprob')).toBe('rgba(239, 68, 68, 0.6)')
    expect(colourOf(-2.5, 'logprob')).toBe('rgba(245, 158, 11, 0.45)')
    expect(colourOf(0, 'logprob')).toBe('rgba(20, 184, 166, 0.3)')
    // halfway from amber to teal: (245+20)/2, (158+184)/2, (11+166)/2, (0.45+0.3)/2
    expect(colourOf(-1.25, 'logprob')).toBe('rgba(133, 171, 89, 0.375)')
  })

  test('surprisal is −logprob: clear at 0, red from 5 nats', () => {
    expect(tokenValue(tok('a', -2, -1), 'surprisal')).toBe(2)
    expect(colourOf(0, 'surprisal')).toBe('rgba(245, 158, 11, 0)')
    expect(colourOf(9, 'surprisal')).toBe('rgba(239, 68, 68, 0.6)')
  })

  test('the gap diverges from clear at 0: blue below (trainer surer), orange above', () => {
    expect(gap(tok('a', -1, -1.25))).toBe(0.25)
    expect(colourOf(0, 'gap')).toBe('rgba(14, 165, 233, 0)')
    expect(colourOf(-0.25, 'gap')).toBe('rgba(14, 165, 233, 0.35)')
    expect(colourOf(0.25, 'gap')).toBe('rgba(249, 115, 22, 0.35)')
    expect(colourOf(3, 'gap')).toBe('rgba(249, 115, 22, 0.7)')
    expect(gradientOf('gap')).toBe(
      'linear-gradient(to right, rgba(14, 165, 233, 0.7) 0%, rgba(14, 165, 233, 0) 50%, rgba(249, 115, 22, 0) 50%, rgba(249, 115, 22, 0.7) 100%)',
    )
  })

  test('a token the trainer never scored has no gap and no colour', () => {
    const t = tok('x', -0.5, null)
    expect(gap(t)).toBeNull()
    expect(colourOf(tokenValue(t, 'gap'), 'gap')).toBe('transparent')
    expect(tokenDetails(t)).toBe('"x" · logprob -0.5 · p 0.607 · surprisal 0.5 · trainer logprob — (not trained) · gap —')
  })
})
