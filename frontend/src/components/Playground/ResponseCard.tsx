// One model answer with its feedback actions: thumbs up saves it as a demonstration; an edit
// saves the edited answer as one; an edit after a thumbs down saves a preference pair
// (the edit chosen over the original).
import { useState } from 'react'
import { demonstrationRow, preferenceRow, type FeedbackRow, type Message } from './feedback'

interface Props {
  title?: string
  context: Message[]
  text: string
  streaming: boolean
  stopReason?: string | null
  error?: string | null
  onSave: (row: FeedbackRow) => void
  onEdited?: (text: string) => void
  testId?: string
}

export function ResponseCard({ title, context, text, streaming, stopReason, error, onSave, onEdited, testId }: Props) {
  const [vote, setVote] = useState<'up' | 'down' | null>(null)
  const [draft, setDraft] = useState<string | null>(null)
  const unchanged = draft !== null && draft.trim() === text.trim()
  const idle = !streaming && !error && text.length > 0
  const saveEdit = () => {
    if (draft === null || !draft.trim() || (vote === 'down' && unchanged)) return
    const row = vote === 'down' ? preferenceRow(context, draft, text) : demonstrationRow(context, draft)
    onEdited?.(draft)
    setDraft(null)
    onSave(row)
  }
  return (
    <div className="rounded-2xl border border-ink-700 bg-ink-800/60 p-4" data-testid={testId}>
      {title && <div className="mb-2 truncate font-mono text-xs text-accent">{title}</div>}
      {draft === null ? (
        <div className="whitespace-pre-wrap break-words text-sm leading-relaxed text-neutral-100">
          {(streaming ? text : text.trimEnd()) || (streaming ? '' : <span className="text-neutral-500">(empty answer)</span>)}
          {streaming && <span className="ml-0.5 inline-block h-4 w-2 animate-pulse bg-accent align-middle" aria-label="streaming" />}
        </div>
      ) : (
        <EditBox draft={draft} setDraft={setDraft} down={vote === 'down'} unchanged={unchanged} onSave={saveEdit} onCancel={() => setDraft(null)} />
      )}
      {error && <p role="alert" className="mt-2 text-sm text-bad">{error}</p>}
      {idle && draft === null && (
        <div className="mt-3 flex items-center gap-2 text-xs">
          <button className={`btn-ghost px-2 py-1 ${vote === 'up' ? 'border-ok text-ok' : ''}`} aria-label="Thumbs up"
            title="Good answer: save it as a demonstration"
            onClick={() => { setVote('up'); onSave(demonstrationRow(context, text)) }}>▲ Good</button>
          <button className={`btn-ghost px-2 py-1 ${vote === 'down' ? 'border-bad text-bad' : ''}`} aria-label="Thumbs down"
            title="Bad answer: write a better one to save a preference pair"
            onClick={() => { setVote('down'); setDraft(text) }}>▼ Bad</button>
          <button className="btn-ghost px-2 py-1" onClick={() => setDraft(text)}>✎ Edit the answer</button>
          {stopReason && <span className="ml-auto text-neutral-500">{stopReason === 'length' ? 'stopped at max tokens' : 'finished'}</span>}
        </div>
      )}
    </div>
  )
}

function EditBox(props: { draft: string; setDraft: (s: string) => void; down: boolean; unchanged: boolean; onSave: () => void; onCancel: () => void }) {
  return (
    <div>
      <p className="mb-2 text-xs text-neutral-400">
        {props.down
          ? 'Write the answer it should have given: saved as a preference pair (yours chosen, the original rejected).'
          : 'Correct the answer: saved as a demonstration of what the model should say.'}
      </p>
      <textarea className="input min-h-28 font-mono" aria-label="Edited answer" value={props.draft}
        onChange={(e) => props.setDraft(e.target.value)} />
      <div className="mt-2 flex justify-end gap-2">
        <button className="btn-ghost px-3 py-1" onClick={props.onCancel}>Cancel</button>
        <button className="btn-cta px-3 py-1" disabled={!props.draft.trim() || (props.down && props.unchanged)} onClick={props.onSave}>Save edited answer</button>
      </div>
    </div>
  )
}
