// "Learn from this" beside the model picker: the button that opens the learn dialog, then the
// job's progress (step / total, a link to its page), its failure with the reason, or the
// new model's name once it is ready.
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { ProgressBar, StatusLed } from '../ui/Status'
import type { FeedbackKind } from './feedback'
import { progressFraction, progressLine } from './learn'
import { LearnDialog } from './LearnDialog'
import { isBusy, type LearnRequest, type LearnState } from './learnFlow'
import type { ModelOption } from './models'

interface Props {
  state: LearnState
  learners: ModelOption[]
  prefer: FeedbackKind
  pollError: string | null
  onStart: (request: LearnRequest) => void
  onDismiss: () => void
}

export function LearnControl({ state, learners, prefer, pollError, onStart, onDismiss }: Props) {
  const [open, setOpen] = useState(false)
  const busy = isBusy(state)
  return (
    <div className="flex flex-col gap-2" aria-label="Learn from feedback" role="group">
      <span className="label">Learn from feedback</span>
      {learners.length === 0 ? (
        <p className="text-xs text-neutral-500">
          Built-in base models cannot learn: pick a trained model to update it on the answers you rated, edited or
          picked.
        </p>
      ) : (
        <>
          <button className="btn-cta" disabled={busy} onClick={() => setOpen(true)}
            title="A short DPO or SL update of this model on the feedback you saved">
            {busy ? 'Learning…' : '⟳ Learn from this'}
          </button>
          {state.phase === 'idle' && (
            <p className="text-xs text-neutral-500">Update the model on your feedback, then see its answer before and after.</p>
          )}
        </>
      )}
      {state.phase === 'submitting' && <p role="status" className="text-xs text-neutral-400">Starting a job for {state.request.learnerName}…</p>}
      {(state.phase === 'training' || state.phase === 'finding') && (
        <div role="status" aria-label="Learning progress" className="flex flex-col gap-1.5 rounded-xl border border-ink-700 bg-ink-950/60 p-3">
          <div className="flex items-center justify-between gap-2">
            <StatusLed state={state.job.state} />
            <span className="font-mono text-xs text-neutral-300" data-testid="learn-progress">
              {state.phase === 'finding' ? 'finding the new model' : progressLine(state.job)}
            </span>
          </div>
          <ProgressBar value={progressFraction(state.job)} />
          <JobLink id={state.job.id} />
          {pollError && <span className="text-xs text-warn">Could not read the job: {pollError}; trying again.</span>}
        </div>
      )}
      {state.phase === 'failed' && (
        <div role="alert" className="rounded-xl border border-bad/60 bg-bad/10 p-3 text-xs">
          <p className="font-medium text-bad">{state.job ? `Learning ${state.job.state === 'cancelled' ? 'cancelled' : 'failed'}` : 'Not started'}</p>
          <p className="mt-1 whitespace-pre-wrap break-words text-neutral-300">{state.reason}</p>
          <div className="mt-2 flex items-center gap-3">
            {state.job && <JobLink id={state.job.id} />}
            <button className="ml-auto text-neutral-400 hover:text-neutral-100" onClick={onDismiss}>Dismiss</button>
          </div>
        </div>
      )}
      {state.phase === 'learned' && (
        <p role="status" className="text-xs text-ok">
          ✓ {state.model.name} is ready{state.using === 'new' ? ' and picked' : ''}. <JobLink id={state.job.id} />
        </p>
      )}
      {open && <LearnDialog learners={learners} prefer={prefer} onStart={onStart} onClose={() => setOpen(false)} />}
    </div>
  )
}

function JobLink({ id }: { id: string }) {
  return <Link className="text-xs text-accent hover:underline" to={`/training/${id}`}>Open the job page →</Link>
}
