// The "Learn from this" dialog: which model learns, from which feedback dataset (the newest
// version of each; preference pairs train DPO, chat rows SL) and for how many steps.
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { errorMessage } from '../../api/client'
import { Modal } from '../ui/Modal'
import type { FeedbackKind } from './feedback'
import { useFeedbackTarget } from './feedbackTarget'
import { DEFAULT_STEPS, defaultChoice, LEARNS, learnChoices, parseSteps, type LearnChoice } from './learn'
import type { LearnRequest } from './learnFlow'
import type { ModelOption } from './models'
import { listTargets } from './saveFeedback'

interface Props {
  /** The library models of the current mode (only those can learn). */
  learners: ModelOption[]
  /** The kind of feedback this mode makes: the default when nothing was saved yet. */
  prefer: FeedbackKind
  onStart: (request: LearnRequest) => void
  onClose: () => void
}

export function LearnDialog({ learners, prefer, onStart, onClose }: Props) {
  // The same cache entries as the feedback saver's, refreshed by every save.
  const preferences = useQuery({ queryKey: ['feedback-targets', 'preferences'], queryFn: () => listTargets('preferences') })
  const chat = useQuery({ queryKey: ['feedback-targets', 'chat'], queryFn: () => listTargets('chat') })
  const target = useFeedbackTarget()
  const [learner, setLearner] = useState(learners[0]?.id ?? '')
  const [picked, setPicked] = useState<string | null>(null)
  const [stepsText, setStepsText] = useState(String(DEFAULT_STEPS))
  const loading = preferences.isPending || chat.isPending
  const choices = learnChoices(preferences.data ?? [], chat.data ?? [])
  const selected = picked ?? defaultChoice(choices, target, prefer)
  const choice = choices.find((c) => c.dataset.id === selected)
  const steps = parseSteps(stepsText)
  const model = learners.find((o) => o.id === learner)
  const failed = preferences.error ?? chat.error
  const start = () => {
    if (!choice || !model || steps.steps === null) return
    onStart({ learner: model.id, learnerName: model.model?.name ?? model.id, choice, steps: steps.steps })
    onClose()
  }
  return (
    <Modal title="Learn from feedback" onClose={onClose}>
      <p className="text-sm text-neutral-400">
        A short update of the model from its own training state: every row of the feedback trained, one checkpoint at
        the end — the next model. The job runs ahead of ordinary ones.
      </p>
      <div className="mt-4 flex flex-col gap-4">
        <label className="block">
          <span className="label">Model that learns</span>
          {learners.length > 1 ? (
            <select className="input" value={learner} onChange={(e) => setLearner(e.target.value)} aria-label="Model that learns">
              {learners.map((o) => <option key={o.id} value={o.id}>{o.label}</option>)}
            </select>
          ) : (
            <span className="block truncate font-mono text-sm text-accent">{model?.label}</span>
          )}
        </label>
        <label className="block">
          <span className="label">Feedback dataset</span>
          <select className="input" value={selected ?? ''} disabled={loading || choices.length === 0}
            onChange={(e) => setPicked(e.target.value)} aria-label="Feedback dataset">
            {selected === null && <option value="">{loading ? 'Loading…' : choices.length ? 'Pick a dataset…' : 'No feedback saved yet'}</option>}
            {(['preferences', 'chat'] as const).map((kind) => (
              <ChoiceGroup key={kind} kind={kind} choices={choices.filter((c) => c.kind === kind)} />
            ))}
          </select>
          {choice && (
            <span className="mt-1 block text-xs text-neutral-400" data-testid="learn-wording">
              <span className="text-cta">{choice.wording}</span>: {LEARNS[choice.kind].how}.
            </span>
          )}
        </label>
        {!loading && choices.length === 0 && (
          <p className="text-xs text-neutral-500">
            Nothing to learn from yet: mark answers ▲ Good, correct them, or pick the better of two in A/B — each is saved
            as a row of a feedback dataset.
          </p>
        )}
        {failed && <p role="alert" className="text-xs text-bad">Could not list the feedback datasets: {errorMessage(failed)}</p>}
        <label className="block w-40">
          <span className="label">Steps</span>
          <input className={`input font-mono ${steps.error ? 'border-bad/70' : ''}`} inputMode="numeric" aria-label="Steps"
            value={stepsText} onChange={(e) => setStepsText(e.target.value)} />
          {steps.error && <span role="alert" className="mt-1 block text-xs text-bad">{steps.error}</span>}
        </label>
      </div>
      <div className="mt-5 flex justify-end gap-2">
        <button className="btn-ghost" onClick={onClose}>Cancel</button>
        <button className="btn-cta" disabled={!choice || !model || steps.steps === null} onClick={start}>Start learning</button>
      </div>
    </Modal>
  )
}

function ChoiceGroup({ kind, choices }: { kind: FeedbackKind; choices: LearnChoice[] }) {
  if (choices.length === 0) return null
  return (
    <optgroup label={`${LEARNS[kind].wording} (${kind})`}>
      {choices.map(({ dataset: d }) => (
        <option key={d.id} value={d.id}>
          {d.name} · v{d.version} · {d.num_rows} row{d.num_rows === 1 ? '' : 's'}{d.builtin ? ' (example)' : ''}
        </option>
      ))}
    </optgroup>
  )
}
