// Side by side: the same prompt to two models (or two checkpoints), streamed at once; picking
// the better answer saves a preference pair. Blind, the answers are "Answer 1" and "Answer 2"
// in a random order per prompt, the choice counts for B against A in the session's tally,
// and the names are revealed once chosen.
import { useState } from 'react'
import { blindOutcome, randomOrder, sidesInOrder, useBlind, winnerOf, type BlindChoice, type Order, type Side } from './blind'
import { BlindTally } from './BlindTally'
import { preferenceRow, type FeedbackRow, type Message } from './feedback'
import type { Exchange } from './learnFlow'
import { ResponseCard } from './ResponseCard'
import type { SamplingParams } from './sampling'
import { useStream } from './useStream'

interface Props {
  a: string
  b: string
  modelLabel: (id: string) => string
  /** A model's short name (the verdict line's). */
  modelName: (id: string) => string
  params: SamplingParams
  onSave: (row: FeedbackRow) => void
  /** Both answers, once they are in: "before" for learning. */
  onExchange?: (exchanges: Exchange[]) => void
}

/** One prompt's comparison: the models asked (the pickers may change after), and, blind,
 *  which answer is shown first and what the person chose. */
interface Trial {
  a: string
  b: string
  blind: boolean
  order: Order
  choice: BlindChoice | null
}

export function ABPanel({ a, b, modelLabel, modelName, params, onSave, onExchange }: Props) {
  const [prompt, setPrompt] = useState('')
  const [asked, setAsked] = useState<Message[] | null>(null)
  const [trial, setTrial] = useState<Trial | null>(null)
  const [run, setRun] = useState(0)
  const blind = useBlind((s) => s.blind)
  const setBlind = useBlind((s) => s.setBlind)
  const record = useBlind((s) => s.record)
  const left = useStream()
  const right = useStream()
  const streaming = left.state.streaming || right.state.streaming
  const go = async () => {
    const messages: Message[] = [{ role: 'user', content: prompt.trim() }]
    setAsked(messages)
    setRun((r) => r + 1)
    setTrial({ a, b, blind, order: randomOrder(), choice: null })
    // The same seed on both sides, so differences come from the models, not the dice.
    const [first, second] = await Promise.all([left.start(a, messages, params), right.start(b, messages, params)])
    const answered: Exchange[] = []
    if (first !== null) answered.push({ model: a, context: messages, answer: first })
    if (second !== null) answered.push({ model: b, context: messages, answer: second })
    onExchange?.(answered)
  }
  const stop = () => { left.stop(); right.stop() }
  const done = asked && trial && !streaming && !left.state.error && !right.state.error
  const same = left.state.text.trim() === right.state.text.trim()
  const stream = (side: Side) => (side === 'a' ? left : right)
  const prefer = (winner: Side) => {
    if (!asked) return
    const loser: Side = winner === 'a' ? 'b' : 'a'
    onSave(preferenceRow(asked, stream(winner).state.text, stream(loser).state.text))
  }
  const choose = (choice: BlindChoice) => {
    if (!trial || trial.choice) return
    record(trial.a, trial.b, blindOutcome(choice, trial.order))
    setTrial({ ...trial, choice })
    // The choice is a preference too: offered to save, as an A/B pick is.
    const winner = winnerOf(choice, trial.order)
    if (winner) prefer(winner)
  }
  const hidden = !!trial?.blind && !trial.choice
  const sides: Side[] = trial?.blind ? sidesInOrder(trial.order) : ['a', 'b']
  const shownA = trial?.a ?? a
  const shownB = trial?.b ?? b
  return (
    <div className="flex flex-col gap-4">
      <div className="flex items-end gap-2">
        <textarea className="input min-h-[52px] flex-1" aria-label="Prompt for both models" placeholder="One prompt, sent to both models"
          value={prompt} onChange={(e) => setPrompt(e.target.value)}
          onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey && prompt.trim() && !streaming) { e.preventDefault(); void go() } }} />
        {streaming ? (
          <button className="btn-ghost border-bad text-bad" onClick={stop}>■ Stop both</button>
        ) : (
          <button className="btn-cta" disabled={!prompt.trim()} onClick={() => void go()}>Compare</button>
        )}
      </div>
      <label className="flex items-center gap-2 self-start text-sm text-neutral-300" title="Answers shown as Answer 1 and Answer 2 in a random order; the names are revealed after you choose">
        <input type="checkbox" className="accent-cta" checked={blind} onChange={(e) => setBlind(e.target.checked)} aria-label="Blind" />
        Blind judging
        <span className="text-xs text-neutral-500">
          {blind === !!trial?.blind || !trial ? 'answers unnamed and shuffled, named once you choose' : 'from the next prompt'}
        </span>
      </label>
      <div className="grid grid-cols-2 gap-4">
        {sides.map((side, i) => {
          const s = stream(side)
          const id = side === 'a' ? shownA : shownB
          const position = `Answer ${i + 1}`
          const name = `Model ${side.toUpperCase()}`
          return (
            <div key={side} className="flex flex-col gap-2">
              <div className="text-xs uppercase tracking-wider text-neutral-400">
                {!trial?.blind ? name : hidden ? position : `${position} · ${name}`}
              </div>
              {!asked ? (
                <div className="rounded-2xl border border-dashed border-ink-600 p-6 text-sm text-neutral-500">{modelLabel(id)}</div>
              ) : hidden && streaming ? (
                // Shown together once both are done: which one streams faster would give the name away.
                <div className="rounded-2xl border border-ink-700 bg-ink-800/60 p-4 text-sm text-neutral-500" data-testid={`blind-${i + 1}`}>
                  <span className="led mr-2 animate-pulse bg-accent" />Writing… both answers appear together.
                </div>
              ) : (
                <ResponseCard key={run} title={hidden ? position : modelLabel(id)} context={asked} text={s.state.text}
                  streaming={s.state.streaming} stopReason={s.state.stopReason} error={s.state.error} onSave={onSave}
                  onEdited={s.setText} testId={trial?.blind ? `blind-${i + 1}` : `ab-${side}`} />
              )}
            </div>
          )
        })}
      </div>
      {done && !trial.blind && (
        <div className="card flex items-center gap-3 py-3">
          <span className="text-sm text-neutral-300">Which answer is better?</span>
          <button className="btn-ghost" disabled={same} onClick={() => prefer('a')}>◀ A is better</button>
          <button className="btn-ghost" disabled={same} onClick={() => prefer('b')}>B is better ▶</button>
          <span className="text-xs text-neutral-500">
            {same ? 'Both answers are identical: nothing to prefer.' : 'Saved as a preference pair: the better one chosen, the other rejected.'}
          </span>
        </div>
      )}
      {done && trial.blind && !trial.choice && (
        <div className="card flex flex-wrap items-center gap-3 py-3">
          <span className="text-sm text-neutral-300">Which answer is better?</span>
          <button className="btn-ghost whitespace-nowrap" disabled={same} onClick={() => choose('first')}>◀ Answer 1 is better</button>
          <button className="btn-ghost" onClick={() => choose('tie')}>Tie</button>
          <button className="btn-ghost whitespace-nowrap" disabled={same} onClick={() => choose('second')}>Answer 2 is better ▶</button>
          <span className="text-xs text-neutral-500">
            {same ? 'Both answers are identical: a tie.' : 'Counts in the tally; a better answer is offered to save as a preference pair.'}
          </span>
        </div>
      )}
      {trial?.blind && trial.choice && (
        <p role="status" className="card py-3 text-sm text-neutral-300" data-testid="reveal">
          {sidesInOrder(trial.order).map((side, i) => (
            <span key={side}>
              {i > 0 && ' · '}Answer {i + 1} was <span className="font-mono text-accent">{modelLabel(side === 'a' ? trial.a : trial.b)}</span> ({side.toUpperCase()})
            </span>
          ))}
          <span className="text-neutral-500"> — you chose {trial.choice === 'tie' ? 'a tie' : `Answer ${trial.choice === 'first' ? 1 : 2}`}.</span>
        </p>
      )}
      {(blind || trial?.blind) && <BlindTally a={shownA} b={shownB} modelName={modelName} />}
    </div>
  )
}
