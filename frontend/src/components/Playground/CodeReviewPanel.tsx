// Code review: paste code into Monaco, get a streamed review, rate or correct it.
import { lazy, Suspense, useState } from 'react'
import type { FeedbackRow, Message } from './feedback'
import { ResponseCard } from './ResponseCard'
import { LANGUAGES, reviewMessages, SAMPLE_CODE } from './review'
import type { SamplingParams } from './sampling'
import { useStream } from './useStream'

const CodeEditor = lazy(() => import('./CodeEditor'))

interface Props {
  model: string
  modelLabel: (id: string) => string
  params: SamplingParams
  onSave: (row: FeedbackRow) => void
}

export function CodeReviewPanel({ model, modelLabel, params, onSave }: Props) {
  const [language, setLanguage] = useState('python')
  const [code, setCode] = useState(SAMPLE_CODE)
  const [asked, setAsked] = useState<Message[] | null>(null)
  const [run, setRun] = useState(0)
  const stream = useStream()
  const review = () => {
    const messages = reviewMessages(language, code)
    setAsked(messages)
    setRun((r) => r + 1)
    void stream.start(model, messages, params)
  }
  return (
    <div className="flex flex-col gap-4">
      <div className="card p-0 overflow-hidden">
        <div className="flex items-center gap-3 border-b border-ink-700 px-4 py-2">
          <span className="label mb-0">Code</span>
          <select className="input w-40 py-1" aria-label="Language" value={language} onChange={(e) => setLanguage(e.target.value)}>
            {LANGUAGES.map((l) => <option key={l.id} value={l.id}>{l.name}</option>)}
          </select>
          <span className="ml-auto text-xs text-neutral-500">sent as a review request: system “You review … code.” + your code</span>
        </div>
        <Suspense fallback={<div className="h-[360px] p-4 text-sm text-neutral-500">Loading editor…</div>}>
          <CodeEditor language={language} value={code} onChange={setCode} />
        </Suspense>
      </div>
      <div className="flex gap-2">
        {stream.state.streaming ? (
          <button className="btn-ghost border-bad text-bad" onClick={stream.stop}>■ Stop</button>
        ) : (
          <button className="btn-cta" disabled={!code.trim()} onClick={review}>Review this code</button>
        )}
      </div>
      {asked && (
        <ResponseCard key={run} title={`Review by ${modelLabel(model)}`} context={asked} text={stream.state.text}
          streaming={stream.state.streaming} stopReason={stream.state.stopReason} error={stream.state.error}
          onSave={onSave} onEdited={stream.setText} testId="review-answer" />
      )}
    </div>
  )
}
