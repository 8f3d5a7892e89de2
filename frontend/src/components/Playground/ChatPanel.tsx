// The chat: a conversation kept in state, each reply streamed token by token; every reply
// can be rated or edited into a feedback row. The latest answer is reported: "before" for
// learning.
import { useEffect, useRef, useState } from 'react'
import type { FeedbackRow, Message } from './feedback'
import type { Exchange } from './learnFlow'
import { ResponseCard } from './ResponseCard'
import type { SamplingParams } from './sampling'
import { useStream } from './useStream'

interface Turn extends Message {
  id: number
  model?: string
}

interface Props {
  model: string
  modelLabel: (id: string) => string
  params: SamplingParams
  onSave: (row: FeedbackRow) => void
  /** The last answer with what it answered; none after Clear. */
  onExchange?: (exchanges: Exchange[]) => void
}

let nextId = 1

export function ChatPanel({ model, modelLabel, params, onSave, onExchange }: Props) {
  const [system, setSystem] = useState('')
  const [turns, setTurns] = useState<Turn[]>([])
  const [input, setInput] = useState('')
  const [asked, setAsked] = useState<Message[] | null>(null)
  const stream = useStream()
  const bottom = useRef<HTMLDivElement>(null)
  useEffect(() => {
    // Braces matter: newer Chromium returns a Promise from scrollIntoView, and an effect
    // must return nothing or a cleanup function.
    bottom.current?.scrollIntoView?.({ block: 'nearest' })
  }, [turns.length, stream.state.text])

  const contextOf = (upTo: Turn[]): Message[] => [
    ...(system.trim() ? [{ role: 'system' as const, content: system.trim() }] : []),
    ...upTo.map(({ role, content }) => ({ role, content })),
  ]
  const send = async () => {
    const text = input.trim()
    if (!text || stream.state.streaming) return
    const next = [...turns, { id: nextId++, role: 'user' as const, content: text }]
    const context = contextOf(next)
    setTurns(next)
    setInput('')
    setAsked(context)
    const answer = await stream.start(model, context, params)
    // A failed answer shows its error; the message goes back to the box to retry.
    if (answer === null) {
      setTurns(turns)
      setInput(text)
      return
    }
    setTurns((t) => [...t, { id: nextId++, role: 'assistant', content: answer, model }])
    setAsked(null)
    stream.reset()
    onExchange?.([{ model, context, answer }])
  }
  const edit = (id: number, content: string) => setTurns((t) => t.map((x) => (x.id === id ? { ...x, content } : x)))
  const clear = () => { stream.reset(); setTurns([]); setAsked(null); onExchange?.([]) }

  return (
    <div className="flex flex-col gap-4">
      <input className="input" placeholder="System prompt (optional), e.g. You are a concise assistant."
        aria-label="System prompt" value={system} onChange={(e) => setSystem(e.target.value)} />
      <div className="card flex min-h-[360px] flex-col gap-3" aria-label="Conversation">
        {turns.length === 0 && !asked && (
          <p className="m-auto max-w-md text-center text-sm text-neutral-500">
            Ask something to start. Rate or edit any answer to save it as training data for your next job.
          </p>
        )}
        {turns.map((turn, i) =>
          turn.role === 'user' ? (
            <UserBubble key={turn.id} text={turn.content} />
          ) : (
            <ResponseCard key={turn.id} title={modelLabel(turn.model ?? model)} context={contextOf(turns.slice(0, i))}
              text={turn.content} streaming={false} onSave={onSave} onEdited={(c) => edit(turn.id, c)} />
          ),
        )}
        {asked && (
          <ResponseCard title={modelLabel(model)} context={asked} text={stream.state.text} streaming={stream.state.streaming}
            error={stream.state.error} onSave={onSave} testId="live-answer" />
        )}
        <div ref={bottom} />
      </div>
      <div className="flex items-end gap-2">
        <textarea className="input min-h-[52px] flex-1" placeholder="Message (Enter sends, Shift+Enter for a new line)"
          aria-label="Message" value={input} onChange={(e) => setInput(e.target.value)}
          onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); void send() } }} />
        {stream.state.streaming ? (
          <button className="btn-ghost border-bad text-bad" onClick={stream.stop}>■ Stop</button>
        ) : (
          <button className="btn-cta" disabled={!input.trim()} onClick={() => void send()}>Send</button>
        )}
        <button className="btn-ghost" onClick={clear} disabled={turns.length === 0 && !asked}>Clear</button>
      </div>
    </div>
  )
}

function UserBubble({ text }: { text: string }) {
  return (
    <div className="ml-auto max-w-[80%] whitespace-pre-wrap break-words rounded-2xl bg-accent/15 px-4 py-2 text-sm text-neutral-100 ring-1 ring-accent/30">
      {text}
    </div>
  )
}
