// Side by side: the same prompt to two models (or two checkpoints), streamed at once; picking
// the better answer saves a preference pair.
import { useState } from 'react'
import { preferenceRow, type FeedbackRow, type Message } from './feedback'
import { ResponseCard } from './ResponseCard'
import type { SamplingParams } from './sampling'
import { useStream } from './useStream'

interface Props {
  a: string
  b: string
  modelLabel: (id: string) => string
  params: SamplingParams
  onSave: (row: FeedbackRow) => void
}

export function ABPanel({ a, b, modelLabel, params, onSave }: Props) {
  const [prompt, setPrompt] = useState('')
  const [asked, setAsked] = useState<Message[] | null>(null)
  const [run, setRun] = useState(0)
  const left = useStream()
  const right = useStream()
  const streaming = left.state.streaming || right.state.streaming
  const go = () => {
    const messages: Message[] = [{ role: 'user', content: prompt.trim() }]
    setAsked(messages)
    setRun((r) => r + 1)
    // The same seed on both sides, so differences come from the models, not the dice.
    void left.start(a, messages, params)
    void right.start(b, messages, params)
  }
  const stop = () => { left.stop(); right.stop() }
  const done = asked && !streaming && !left.state.error && !right.state.error
  const same = left.state.text.trim() === right.state.text.trim()
  const prefer = (winner: 'a' | 'b') => {
    if (!asked) return
    const [chosen, rejected] = winner === 'a' ? [left.state.text, right.state.text] : [right.state.text, left.state.text]
    onSave(preferenceRow(asked, chosen, rejected))
  }
  return (
    <div className="flex flex-col gap-4">
      <div className="flex items-end gap-2">
        <textarea className="input min-h-[52px] flex-1" aria-label="Prompt for both models" placeholder="One prompt, sent to both models"
          value={prompt} onChange={(e) => setPrompt(e.target.value)}
          onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey && prompt.trim() && !streaming) { e.preventDefault(); go() } }} />
        {streaming ? (
          <button className="btn-ghost border-bad text-bad" onClick={stop}>■ Stop both</button>
        ) : (
          <button className="btn-cta" disabled={!prompt.trim()} onClick={go}>Compare</button>
        )}
      </div>
      <div className="grid grid-cols-2 gap-4">
        {(['a', 'b'] as const).map((side) => {
          const s = side === 'a' ? left : right
          const id = side === 'a' ? a : b
          return (
            <div key={side} className="flex flex-col gap-2">
              <div className="text-xs uppercase tracking-wider text-neutral-400">Model {side.toUpperCase()}</div>
              {asked ? (
                <ResponseCard key={run} title={modelLabel(id)} context={asked} text={s.state.text} streaming={s.state.streaming}
                  stopReason={s.state.stopReason} error={s.state.error} onSave={onSave} onEdited={s.setText} testId={`ab-${side}`} />
              ) : (
                <div className="rounded-2xl border border-dashed border-ink-600 p-6 text-sm text-neutral-500">{modelLabel(id)}</div>
              )}
            </div>
          )
        })}
      </div>
      {done && (
        <div className="card flex items-center gap-3 py-3">
          <span className="text-sm text-neutral-300">Which answer is better?</span>
          <button className="btn-ghost" disabled={same} onClick={() => prefer('a')}>◀ A is better</button>
          <button className="btn-ghost" disabled={same} onClick={() => prefer('b')}>B is better ▶</button>
          <span className="text-xs text-neutral-500">
            {same ? 'Both answers are identical: nothing to prefer.' : 'Saved as a preference pair: the better one chosen, the other rejected.'}
          </span>
        </div>
      )}
    </div>
  )
}
