// After learning: the conversation's last prompt re-sent to the new model, its answer ("after")
// beside the old model's, kept ("before"), under the lineage line (parent → new model, the
// feedback dataset's version and rows); "back to <old>" picks the old model again.
import { useEffect, useEffectEvent, useRef } from 'react'
import { Link } from 'react-router-dom'
import type { FeedbackRow } from './feedback'
import { lastPrompt, lineageLine, type LearnState } from './learnFlow'
import { ResponseCard } from './ResponseCard'
import type { SamplingParams } from './sampling'
import { useStream } from './useStream'

type Learned = Extract<LearnState, { phase: 'learned' }>

interface Props {
  state: Learned
  modelLabel: (id: string) => string
  params: SamplingParams
  onSave: (row: FeedbackRow) => void
  onBack: () => void
  onForward: () => void
  onDismiss: () => void
  /** Judge the old model against the new one, blind, in A/B. */
  onJudge: (old: string, next: string) => void
}

export function BeforeAfter({ state, modelLabel, params, onSave, onBack, onForward, onDismiss, onJudge }: Props) {
  const { model, request, before } = state
  const line = lineageLine(model, request)
  const stream = useStream()
  const box = useRef<HTMLElement>(null)
  const { start } = stream
  // The same prompt to the new model, with the sampling knobs as they are now; a stopped or
  // failed answer can be asked again.
  const ask = () => { if (before) void start(model.id, before.context, params) }
  const askOnce = useEffectEvent(ask)
  useEffect(() => {
    askOnce()
    box.current?.scrollIntoView?.({ block: 'nearest' })
  }, [model.id, before])
  const old = request.learner
  return (
    <section ref={box} className="card mt-4 flex flex-col gap-3 border-cta/40" aria-label="Before and after learning">
      <div className="flex flex-wrap items-center gap-x-3 gap-y-1">
        <h3 className="font-semibold text-neutral-100">Learned from your feedback</h3>
        <span className="text-sm text-neutral-300" data-testid="lineage-line">
          <span className="font-mono text-neutral-400">{line.parent}</span> → <span className="font-mono text-cta">{line.child}</span>
          <span className="text-neutral-500"> · {line.data} · </span>
          <Link className="text-accent hover:underline" to={`/training/${state.job.id}`}>job</Link>
          <span className="text-neutral-500"> · </span>
          <Link className="text-accent hover:underline" to={`/models/${model.id}`}>model</Link>
        </span>
      </div>
      {before ? (
        <>
          <p className="rounded-xl bg-accent/10 px-3 py-2 text-sm text-neutral-200 ring-1 ring-accent/20">
            <span className="mr-2 text-xs uppercase tracking-wider text-neutral-500">Prompt</span>
            {lastPrompt(before.context)}
          </p>
          <div className="grid grid-cols-2 gap-4">
            <div className="flex flex-col gap-2">
              <div className="text-xs uppercase tracking-wider text-neutral-400">Before</div>
              <ResponseCard title={modelLabel(before.model)} context={before.context} text={before.answer} streaming={false}
                onSave={onSave} testId="before-answer" />
            </div>
            <div className="flex flex-col gap-2">
              <div className="text-xs uppercase tracking-wider text-cta">After</div>
              <ResponseCard title={modelLabel(model.id)} context={before.context} text={stream.state.text}
                streaming={stream.state.streaming} stopReason={stream.state.stopReason} error={stream.state.error}
                onSave={onSave} onEdited={stream.setText} testId="after-answer" />
            </div>
          </div>
        </>
      ) : (
        <p className="text-sm text-neutral-400">No answer yet to compare: ask something and the new model answers.</p>
      )}
      <div className="flex flex-wrap items-center gap-2">
        {state.using === 'new' ? (
          <button className="btn-ghost" onClick={onBack}>← Back to {request.learnerName}</button>
        ) : (
          <button className="btn-ghost" onClick={onForward}>Use {model.name} again</button>
        )}
        {before && !stream.state.streaming && <button className="btn-ghost" onClick={ask}>Ask the new model again</button>}
        <button className="btn-ghost" onClick={() => onJudge(old, model.id)}>Judge blind: old vs new →</button>
        <span className="ml-auto text-xs text-neutral-500">
          {state.using === 'new' ? `Now talking to ${model.name}.` : `Back on ${request.learnerName}; ${model.name} stays in the list.`}
        </span>
        <button className="btn-ghost" onClick={onDismiss}>Dismiss</button>
      </div>
    </section>
  )
}
