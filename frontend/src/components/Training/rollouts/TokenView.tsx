// An assistant turn as the tokens the policy sampled, each coloured on the chosen scale; its
// values show on hover (the title, and the readout line under the tokens).
import { useState } from 'react'
import { colourOf, tokenDetails, tokenValue, type ColourMode } from './colour'
import type { Token } from './types'

/** A newline shown as ↵ before it breaks the line; an empty token (a special one decoded to
 * nothing) as ∅, so every token has something to hover. */
const visible = (text: string) => (text === '' ? '∅' : text.replace(/\n/g, '↵\n'))

export function TokenView({ tokens, mode }: { tokens: readonly Token[]; mode: ColourMode }) {
  const [hovered, setHovered] = useState<number | null>(null)
  const shown = hovered === null ? null : tokens[hovered]
  return (
    <div className="flex flex-col gap-1">
      <p className="whitespace-pre-wrap break-words font-mono text-xs leading-5 text-neutral-100" data-testid="token-view" onMouseLeave={() => setHovered(null)}>
        {tokens.map((t, i) => (
          <span
            key={i}
            data-testid="token"
            title={tokenDetails(t)}
            onMouseEnter={() => setHovered(i)}
            className={`rounded-sm ${hovered === i ? 'outline outline-1 outline-neutral-300' : ''}`}
            style={{ background: colourOf(tokenValue(t, mode), mode) }}
          >
            {visible(t.text)}
          </span>
        ))}
      </p>
      <p className="min-h-4 font-mono text-[11px] text-neutral-500" data-testid="token-readout">
        {shown ? tokenDetails(shown) : `${tokens.length} tokens · hover one for its values`}
      </p>
    </div>
  )
}
