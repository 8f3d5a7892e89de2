// One turn of an episode, styled by who wrote it: the policy (its tokens, coloured), a tool's
// result, the user or the environment. A tool call is shown as a call; an error as the
// environment saw it.
import type { ColourMode } from './colour'
import { TokenView } from './TokenView'
import type { Token, ToolCall, Turn } from './types'

const STYLE: Record<string, { label: string; box: string; tag: string }> = {
  assistant: { label: 'policy', box: 'border-cta/50 bg-cta/5', tag: 'text-cta' },
  user: { label: 'user', box: 'border-accent/50 bg-accent/5', tag: 'text-accent' },
  tool: { label: 'tool result', box: 'border-ink-600 bg-ink-950', tag: 'text-warn' },
  environment: { label: 'environment', box: 'border-neutral-600 border-dashed bg-ink-950', tag: 'text-neutral-400' },
  system: { label: 'system', box: 'border-ink-700 bg-ink-950', tag: 'text-neutral-500' },
}

function Call({ call }: { call: ToolCall }) {
  return (
    <div className="mt-2 rounded-lg border border-warn/40 bg-ink-950 p-2 font-mono text-xs" data-testid="tool-call">
      <span className="text-neutral-500">call </span>
      <span className="text-warn">{call.name}</span>
      <pre className="mt-1 whitespace-pre-wrap break-all text-neutral-300">{JSON.stringify(call.arguments, null, 2)}</pre>
    </div>
  )
}

export function TurnView({ turn, tokens, mode, index }: { turn: Turn; tokens: readonly Token[]; mode: ColourMode; index: number }) {
  const style = STYLE[turn.role] ?? { ...STYLE.environment, label: turn.role }
  const body = turn.role === 'assistant' && tokens.length > 0
    ? <TokenView tokens={tokens} mode={mode} />
    : <p className="whitespace-pre-wrap break-words font-mono text-xs text-neutral-200">{turn.content || <i className="text-neutral-600">(empty)</i>}</p>
  return (
    <li className={`rounded-xl border-l-4 border p-2.5 ${style.box}`} data-testid={`turn-${turn.role}`} aria-label={`turn ${index + 1}: ${style.label}`}>
      <div className={`mb-1 text-[11px] uppercase tracking-wider ${style.tag}`}>
        {index + 1} · {style.label}
      </div>
      {turn.role === 'system' ? (
        <details>
          <summary className="cursor-pointer text-xs text-neutral-500">{turn.content.length} characters</summary>
          {body}
        </details>
      ) : (
        body
      )}
      {turn.tool_call && <Call call={turn.tool_call} />}
      {turn.error && (
        <p className="mt-2 rounded-lg border border-bad/60 bg-bad/10 p-2 font-mono text-xs text-bad" data-testid="turn-error">
          <b>error</b> (the environment could not use this turn): {turn.error}
        </p>
      )}
    </li>
  )
}
