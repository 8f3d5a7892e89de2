// One line of a step's rollouts file (runs/<run>/rollouts/step_N.jsonl, written by
// backend/thinker/algorithms/rl.py `_write_rollouts`), read defensively: the server passes the
// lines through as they are, and runs from before environments have no `episodes`.

export interface ToolCall {
  name: string
  arguments: Record<string, unknown>
}

export interface Turn {
  /** user, assistant, tool, environment (or system); another is shown as an environment turn
   * under its own name. */
  role: string
  content: string
  tool_call: ToolCall | null
  /** What the environment could not use in this (assistant) turn, as it saw it. */
  error: string | null
}

export interface Token {
  text: string
  /** The sampler's log q of the token. */
  logprob: number
  /** The learner's log p of the same token; null where the group was not trained (dropped). */
  trainer_logprob: number | null
  /** Index into the episode's turns of the assistant turn the token belongs to. */
  turn: number
}

export interface Episode {
  turns: Turn[]
  tokens: Token[]
  truncated: boolean
  /** The adapter version the episode was sampled from. */
  version: number | null
  reward: number
  advantage: number
}

export interface RolloutGroup {
  prompt: string
  answer: string | null
  completions: string[]
  rewards: number[]
  advantages: number[]
  dropped: boolean
  /** One per completion, same order; null for a line written before episodes existed. */
  episodes: Episode[] | null
}

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])
const num = (v: unknown, fallback = Number.NaN): number => (typeof v === 'number' ? v : fallback)
const text = (v: unknown): string => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v))
const orNull = (v: unknown): string | null => (typeof v === 'string' ? v : null)

function toolCall(v: unknown): ToolCall | null {
  if (!isObject(v)) return null
  return { name: text(v.name), arguments: isObject(v.arguments) ? v.arguments : {} }
}

function turn(v: unknown): Turn {
  const t = isObject(v) ? v : {}
  return { role: text(t.role) || 'environment', content: text(t.content), tool_call: toolCall(t.tool_call), error: orNull(t.error) }
}

function token(v: unknown): Token {
  const t = isObject(v) ? v : {}
  return {
    text: text(t.text),
    logprob: num(t.logprob),
    trainer_logprob: typeof t.trainer_logprob === 'number' ? t.trainer_logprob : null,
    turn: num(t.turn, 0),
  }
}

function episode(v: unknown, reward: number, advantage: number): Episode {
  const e = isObject(v) ? v : {}
  return {
    turns: list(e.turns).map(turn),
    tokens: list(e.tokens).map(token),
    truncated: e.truncated === true,
    version: typeof e.version === 'number' ? e.version : null,
    reward: num(e.reward, reward),
    advantage: num(e.advantage, advantage),
  }
}

/** One JSONL line → a group; `episodes` is null when the line has none (an older run). */
export function parseGroup(line: Json): RolloutGroup {
  const rewards = list(line.rewards).map((r) => num(r))
  const advantages = list(line.advantages).map((a) => num(a))
  const episodes = Array.isArray(line.episodes) && line.episodes.length > 0
    ? line.episodes.map((e, i) => episode(e, rewards[i] ?? Number.NaN, advantages[i] ?? Number.NaN))
    : null
  return {
    prompt: text(line.prompt),
    answer: orNull(line.answer),
    completions: list(line.completions).map(text),
    rewards,
    advantages,
    dropped: line.dropped === true,
    episodes,
  }
}

export const parseGroups = (data: readonly Json[]): RolloutGroup[] => data.map(parseGroup)
