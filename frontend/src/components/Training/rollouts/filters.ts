// Which groups, and which of their completions, the inspector shows under each filter.
import type { RolloutGroup } from './types'

export type RolloutFilter = 'all' | 'zero_advantage' | 'dropped' | 'truncated' | 'highest' | 'lowest'

/** How many completions "highest" and "lowest" reward show, across the step's groups. */
export const TOP_N = 10

export const FILTERS: readonly { id: RolloutFilter; label: string; title: string }[] = [
  { id: 'all', label: 'All', title: 'Every group of the step' },
  { id: 'zero_advantage', label: 'Zero advantage', title: 'Groups whose completions all have advantage 0: they teach nothing' },
  { id: 'dropped', label: 'Dropped', title: 'Groups left out of training (all rewards equal)' },
  { id: 'truncated', label: 'Truncated', title: 'Episodes cut off by the token or turn budget' },
  { id: 'highest', label: 'Highest reward', title: `The ${TOP_N} completions with the highest reward` },
  { id: 'lowest', label: 'Lowest reward', title: `The ${TOP_N} completions with the lowest reward` },
]

/** A group on screen: its index in the step and the completions shown, in order. */
export interface ShownGroup {
  index: number
  group: RolloutGroup
  rows: number[]
}

const allRows = (g: RolloutGroup) => g.completions.map((_, i) => i)
const isZeroAdvantage = (g: RolloutGroup) => g.advantages.length > 0 && g.advantages.every((a) => a === 0)
const truncatedRows = (g: RolloutGroup) => (g.episodes ?? []).flatMap((e, i) => (e.truncated ? [i] : []))

/** The `TOP_N` completions by reward (ties in step order), gathered back into their groups,
 * the group of the best (or worst) one first. */
function extremes(groups: readonly RolloutGroup[], highest: boolean): ShownGroup[] {
  const ranked = groups
    .flatMap((g, index) => g.rewards.map((reward, row) => ({ index, row, reward })))
    .filter((c) => Number.isFinite(c.reward) && c.row < groups[c.index].completions.length)
    .sort((a, b) => (highest ? b.reward - a.reward : a.reward - b.reward))
    .slice(0, TOP_N)
  const shown = new Map<number, ShownGroup>()
  for (const { index, row } of ranked) {
    const entry = shown.get(index) ?? { index, group: groups[index], rows: [] }
    entry.rows.push(row)
    shown.set(index, entry)
  }
  return [...shown.values()]
}

export function applyFilter(groups: readonly RolloutGroup[], filter: RolloutFilter): ShownGroup[] {
  const each = (keep: (g: RolloutGroup) => boolean, rows = allRows) =>
    groups.flatMap((group, index) => (keep(group) ? [{ index, group, rows: rows(group) }] : []))
  switch (filter) {
    case 'all':
      return each(() => true)
    case 'zero_advantage':
      return each(isZeroAdvantage)
    case 'dropped':
      return each((g) => g.dropped)
    case 'truncated':
      return each((g) => truncatedRows(g).length > 0, truncatedRows)
    case 'highest':
    case 'lowest':
      return extremes(groups, filter === 'highest')
  }
}

/** The count on a filter's button: groups, or completions for the per-completion filters. */
export function filterCount(groups: readonly RolloutGroup[], filter: RolloutFilter): number {
  const shown = applyFilter(groups, filter)
  return filter === 'truncated' || filter === 'highest' || filter === 'lowest'
    ? shown.reduce((n, s) => n + s.rows.length, 0)
    : shown.length
}
