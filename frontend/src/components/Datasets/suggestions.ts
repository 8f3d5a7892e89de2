// Detection's suggestions are sentences for people; the ones that propose a concrete change
// are recognised here so that the UI can offer to apply them in one click.
import type { Kind, Mapping } from './http'

export interface SuggestionAction {
  set: Mapping
  remove?: string[]
  kind?: Kind
}

export interface Suggestion {
  text: string
  action: SuggestionAction | null
}

const PATTERNS: [RegExp, (source: string, canonical: string) => SuggestionAction][] = [
  [/^field `(.+?)` looks like the (\w+): map it\?$/, (source, canonical) => ({ set: { [canonical]: source } })],
  [
    /^`(.+?)` holds short answers:.*map it to `completion`/,
    (source) => ({ set: { completion: source }, remove: ['answer'], kind: 'prompt_completion' }),
  ],
  [
    /^`(.+?)` reads as a Human\/Assistant transcript/,
    (source) => ({ set: { messages: `transcript:${source}` }, kind: 'chat' }),
  ],
]

export function parseSuggestion(text: string): Suggestion {
  for (const [pattern, build] of PATTERNS) {
    const match = pattern.exec(text)
    if (match) return { text, action: build(match[1], match[2] ?? '') }
  }
  return { text, action: null }
}

export function applyAction(mapping: Mapping, action: SuggestionAction): Mapping {
  const next = { ...mapping }
  for (const field of action.remove ?? []) delete next[field]
  return { ...next, ...action.set }
}

export function isApplied(mapping: Mapping, kind: Kind | null, action: SuggestionAction): boolean {
  const setDone = Object.entries(action.set).every(([k, v]) => mapping[k] === v)
  const removed = (action.remove ?? []).every((k) => !(k in mapping))
  return setDone && removed && (!action.kind || action.kind === kind)
}
