// The token view's colour scales. Each mode maps one number per token onto a fixed scale (not
// one stretched to the episode: a healthy gap of 0.01 must not look like a broken one), and the
// legend draws the same stops.
import { formatValue } from '../../../lib/metrics'
import type { Token } from './types'

export type ColourMode = 'logprob' | 'surprisal' | 'gap'

type Rgba = readonly [number, number, number, number]

export interface Scale {
  min: number
  max: number
  /** Colours at positions 0..1 along [min, max] (a repeated position is a hard stop: each side
   * of the gap's 0 fades in its own hue); values outside are clamped. */
  stops: readonly (readonly [number, Rgba])[]
  label: string
  /** What the two ends and the middle of the legend mean. */
  ends: readonly [string, string, string]
}

const RED: Rgba = [239, 68, 68, 0.6]
const AMBER: Rgba = [245, 158, 11, 0.45]
const TEAL: Rgba = [20, 184, 166, 0.3]
const BLUE: Rgba = [14, 165, 233, 0.7]
const ORANGE: Rgba = [249, 115, 22, 0.7]
const CLEAR_AMBER: Rgba = [245, 158, 11, 0]
const CLEAR_BLUE: Rgba = [14, 165, 233, 0]
const CLEAR_ORANGE: Rgba = [249, 115, 22, 0]

export const SCALES: Record<ColourMode, Scale> = {
  logprob: {
    min: -5, max: 0, stops: [[0, RED], [0.5, AMBER], [1, TEAL]],
    label: "log q: the sampler's logprob of the token",
    ends: ['≤ −5 unlikely', '−2.5', '0 certain'],
  },
  surprisal: {
    min: 0, max: 5, stops: [[0, CLEAR_AMBER], [0.4, [245, 158, 11, 0.35]], [1, RED]],
    label: "−log q: the sampled token's own term of the entropy estimate (the true entropy is not recorded)",
    ends: ['0 nats', '2.5', '≥ 5 surprising'],
  },
  gap: {
    min: -0.5, max: 0.5, stops: [[0, BLUE], [0.5, CLEAR_BLUE], [0.5, CLEAR_ORANGE], [1, ORANGE]],
    label: "log q − log p: the sampler's logprob minus the trainer's, of the same token",
    ends: ['≤ −0.5 trainer surer', '0 agree', '≥ +0.5 sampler surer'],
  },
}

export const MODES: readonly ColourMode[] = ['logprob', 'surprisal', 'gap']

/** The sampler-vs-trainer gap of a token; null where the trainer's logprob was not computed. */
export function gap(t: Token): number | null {
  return t.trainer_logprob === null || !Number.isFinite(t.logprob) ? null : t.logprob - t.trainer_logprob
}

export function tokenValue(t: Token, mode: ColourMode): number | null {
  if (mode === 'gap') return gap(t)
  if (!Number.isFinite(t.logprob)) return null
  return mode === 'logprob' ? t.logprob : -t.logprob
}

const css = ([r, g, b, a]: Rgba) =>
  `rgba(${Math.round(r)}, ${Math.round(g)}, ${Math.round(b)}, ${Number(a.toFixed(3))})`

function mix(a: Rgba, b: Rgba, f: number): Rgba {
  const at = (i: number) => a[i] + (b[i] - a[i]) * f
  return [at(0), at(1), at(2), at(3)]
}

/** The background of a token with `value` on `mode`'s scale; transparent for no value. */
export function colourOf(value: number | null, mode: ColourMode): string {
  if (value === null || Number.isNaN(value)) return 'transparent'
  const { min, max, stops } = SCALES[mode]
  const t = Math.min(1, Math.max(0, (value - min) / (max - min)))
  for (let i = 1; i < stops.length; i++) {
    const [t0, c0] = stops[i - 1]
    const [t1, c1] = stops[i]
    if (t <= t1) return css(mix(c0, c1, (t - t0) / (t1 - t0)))
  }
  return css(stops[stops.length - 1][1])
}

/** The legend's CSS gradient, left (min) to right (max). */
export function gradientOf(mode: ColourMode): string {
  const stops = SCALES[mode].stops.map(([t, c]) => `${css(c)} ${t * 100}%`)
  return `linear-gradient(to right, ${stops.join(', ')})`
}

/** A token's values in words, for its hover. */
export function tokenDetails(t: Token): string {
  const g = gap(t)
  return [
    JSON.stringify(t.text),
    `logprob ${formatValue(t.logprob)}`,
    `p ${formatValue(Math.exp(t.logprob))}`,
    `surprisal ${formatValue(-t.logprob)}`,
    `trainer logprob ${t.trainer_logprob === null ? '— (not trained)' : formatValue(t.trainer_logprob)}`,
    `gap ${g === null ? '—' : formatValue(g)}`,
  ].join(' · ')
}
