// Detection's guesses, each with a one-click apply when it proposes a concrete change.
import type { Kind, Mapping } from './http'
import { isApplied, parseSuggestion, type SuggestionAction } from './suggestions'

interface Props {
  suggestions: string[]
  mapping: Mapping
  kind: Kind | null
  onApply: (action: SuggestionAction) => void
}

export function SuggestionList({ suggestions, mapping, kind, onApply }: Props) {
  if (suggestions.length === 0) return null
  return (
    <ul className="flex flex-col gap-2" aria-label="suggestions">
      {suggestions.map(parseSuggestion).map((s) => {
        const action = s.action
        const applied = action ? isApplied(mapping, kind, action) : false
        return (
          <li key={s.text} className="flex items-start gap-3 rounded-xl border border-warn/30 bg-warn/5 px-3 py-2 text-sm">
            <span className="led mt-1.5 shrink-0 bg-warn" aria-hidden />
            <span className="flex-1 text-neutral-200">{renderCode(s.text)}</span>
            {action &&
              (applied ? (
                <span className="shrink-0 text-xs text-ok">✓ in the mapping</span>
              ) : (
                <button type="button" className="btn-ghost shrink-0 px-3 py-1 text-xs" onClick={() => onApply(action)}>
                  Apply
                </button>
              ))}
          </li>
        )
      })}
    </ul>
  )
}

/** `field` spans in the server's sentences, shown as code. */
function renderCode(text: string) {
  return text.split(/(`[^`]+`)/).map((part, i) =>
    part.startsWith('`') ? (
      <code key={i} className="rounded bg-ink-700 px-1 font-mono text-accent">{part.slice(1, -1)}</code>
    ) : (
      <span key={i}>{part}</span>
    ),
  )
}
