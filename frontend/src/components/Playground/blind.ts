// Blind A/B judging: the two answers shown as "Answer 1" and "Answer 2" in a random order per
// prompt, the person's choice turned back into B's outcome (1 B better, 0 tie, -1 A better),
// and the session's tally per pair of models, which POST /api/evaluations/compare reads.
import { create } from 'zustand'
import { api, unwrap, type Schemas } from '../../api/client'

export type CompareResult = Schemas['CompareResult']

/** Which model's answer is shown first: A's ("ab") or B's ("ba"). */
export type Order = 'ab' | 'ba'
export type Side = 'a' | 'b'
/** What the person picked, by position on screen. */
export type BlindChoice = 'first' | 'tie' | 'second'
/** B's outcome against A on one prompt. */
export type Outcome = 1 | 0 | -1

export function randomOrder(random: () => number = Math.random): Order {
  return random() < 0.5 ? 'ab' : 'ba'
}

/** The model behind an on-screen position (1 or 2). */
export function sideAt(order: Order, position: 1 | 2): Side {
  return (position === 1) === (order === 'ab') ? 'a' : 'b'
}

/** The sides in on-screen order. */
export function sidesInOrder(order: Order): [Side, Side] {
  return order === 'ab' ? ['a', 'b'] : ['b', 'a']
}

/** The winning side of a choice, or null for a tie. */
export function winnerOf(choice: BlindChoice, order: Order): Side | null {
  return choice === 'tie' ? null : sideAt(order, choice === 'first' ? 1 : 2)
}

/** De-randomise a choice into B's outcome: B = the second model picked, the candidate. */
export function blindOutcome(choice: BlindChoice, order: Order): Outcome {
  const winner = winnerOf(choice, order)
  return winner === null ? 0 : winner === 'b' ? 1 : -1
}

/** A pair's key, the same whichever model is A: outcomes are stored from the first id's
 *  point of view as B, so swapping A and B reads the same tally, negated. */
function pairKey(a: string, b: string): { key: string; flipped: boolean } {
  const flipped = a > b
  return { key: flipped ? `${b}\n${a}` : `${a}\n${b}`, flipped }
}

const negate = (o: Outcome): Outcome => (o === 0 ? 0 : (-o as Outcome))

export type Tallies = Record<string, Outcome[]>

/** B's outcomes against A so far this session, in the order judged. */
export function outcomesFor(tallies: Tallies, a: string, b: string): Outcome[] {
  const { key, flipped } = pairKey(a, b)
  const stored = tallies[key] ?? []
  return flipped ? stored.map(negate) : stored
}

export function withOutcome(tallies: Tallies, a: string, b: string, outcome: Outcome): Tallies {
  const { key, flipped } = pairKey(a, b)
  return { ...tallies, [key]: [...(tallies[key] ?? []), flipped ? negate(outcome) : outcome] }
}

export function withoutPair(tallies: Tallies, a: string, b: string): Tallies {
  const { key } = pairKey(a, b)
  const rest = { ...tallies }
  delete rest[key]
  return rest
}

/** B's wins, the ties and B's losses, and how many prompts were decided (not tied). */
export function countOutcomes(outcomes: Outcome[]): { wins: number; ties: number; losses: number; decided: number } {
  const wins = outcomes.filter((o) => o === 1).length
  const losses = outcomes.filter((o) => o === -1).length
  return { wins, ties: outcomes.length - wins - losses, losses, decided: wins + losses }
}

/** Decided prompts still to judge for 80% power at the win rate seen; null when it cannot say. */
export function moreNeeded(result: Pick<CompareResult, 'needed' | 'wins' | 'losses'>): number | null {
  return result.needed === null ? null : Math.max(0, result.needed - result.wins - result.losses)
}

/** The line under the verdict: how far from a reliable answer the tally is. */
export function needLine(result: Pick<CompareResult, 'needed' | 'wins' | 'losses'>): string {
  const more = moreNeeded(result)
  if (more !== null) {
    return more > 0
      ? `about ${more} more decided prompt${more === 1 ? '' : 's'} for a reliable answer`
      : 'enough decided prompts for a reliable answer at this win rate'
  }
  const { wins, losses } = result
  if (wins + losses === 0) return 'only ties so far: no prompt has decided anything yet'
  if (wins === 0 || losses === 0) return 'every decided prompt went one way: judge a few more to see how many it takes'
  if (wins === losses) return 'evenly split so far: at a 50% win rate no number of prompts settles it'
  return 'too close to call: more than 100,000 decided prompts would be needed at this win rate'
}

/** The names the verdict line uses: the models' names, told apart when they are the same. */
export function compareNames(a: string, b: string): { a: string; b: string } {
  return a === b ? { a: `${a} (A)`, b: `${b} (B)` } : { a, b }
}

export async function compareOutcomes(a: string, b: string, outcomes: Outcome[]): Promise<CompareResult> {
  // alpha, resamples and seed keep the server's defaults (the generated type calls them required).
  return unwrap(await api.POST('/api/evaluations/compare', { body: { a, b, outcomes } as Schemas['CompareRequest'] }))
}

interface BlindState {
  /** Judge the next prompts blind. */
  blind: boolean
  tallies: Tallies
  setBlind: (blind: boolean) => void
  record: (a: string, b: string, outcome: Outcome) => void
  reset: (a: string, b: string) => void
}

/** The session's blind judging: kept while the page lives (across modes), not across reloads. */
export const useBlind = create<BlindState>()((set) => ({
  blind: false,
  tallies: {},
  setBlind: (blind) => set({ blind }),
  record: (a, b, outcome) => set((s) => ({ tallies: withOutcome(s.tallies, a, b, outcome) })),
  reset: (a, b) => set((s) => ({ tallies: withoutPair(s.tallies, a, b) })),
}))
