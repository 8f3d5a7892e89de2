// A step's numbers for the inspector's histograms and summary line: per completion its reward
// and length, per trained episode its mean sampler-vs-trainer gap.
import { gap } from './colour'
import type { Episode, RolloutGroup } from './types'

export interface Bin {
  lo: number
  hi: number
  count: number
}

/** `values` into `bins` equal-width bins over their range; one bin when they are all alike. */
export function histogram(values: readonly number[], bins = 10): Bin[] {
  const finite = values.filter(Number.isFinite)
  if (!finite.length) return []
  const lo = Math.min(...finite)
  const hi = Math.max(...finite)
  if (lo === hi) return [{ lo, hi, count: finite.length }]
  const width = (hi - lo) / bins
  const counts = new Array<number>(bins).fill(0)
  for (const v of finite) counts[Math.min(bins - 1, Math.floor((v - lo) / width))]++
  return counts.map((count, i) => ({ lo: lo + i * width, hi: lo + (i + 1) * width, count }))
}

/** The mean of log q − log p over the episode's tokens; null when none was trained. */
export function meanGap(e: Episode): number | null {
  const gaps = e.tokens.map(gap).filter((g): g is number => g !== null)
  return gaps.length ? mean(gaps) : null
}

export function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / Math.max(1, values.length)
}

export interface StepNumbers {
  rewards: number[]
  /** Tokens sampled per episode; characters per completion for a run without episodes. */
  lengths: number[]
  lengthUnit: 'tokens' | 'characters'
  /** One per trained episode (dropped groups have no trainer logprobs). */
  gaps: number[]
  truncated: number
  completions: number
  versions: number[]
}

export function stepNumbers(groups: readonly RolloutGroup[]): StepNumbers {
  const episodes = groups.flatMap((g) => g.episodes ?? [])
  const withEpisodes = groups.length > 0 && groups.every((g) => g.episodes !== null)
  return {
    rewards: groups.flatMap((g) => g.rewards),
    lengths: withEpisodes ? episodes.map((e) => e.tokens.length) : groups.flatMap((g) => g.completions.map((c) => c.length)),
    lengthUnit: withEpisodes ? 'tokens' : 'characters',
    gaps: episodes.map(meanGap).filter((g): g is number => g !== null),
    truncated: episodes.filter((e) => e.truncated).length,
    completions: groups.reduce((n, g) => n + g.completions.length, 0),
    versions: [...new Set(episodes.map((e) => e.version).filter((v): v is number => v !== null))].sort((a, b) => a - b),
  }
}
