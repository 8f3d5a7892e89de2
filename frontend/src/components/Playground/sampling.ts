// The sampling knobs of chat, code review and A/B: the same as POST /api/sample's.
export interface SamplingParams {
  temperature: number
  top_p: number
  max_tokens: number
  /** null = a fresh random seed each time; a number makes answers repeatable. */
  seed: number | null
}

export const DEFAULT_SAMPLING: SamplingParams = { temperature: 0.7, top_p: 1, max_tokens: 256, seed: null }
