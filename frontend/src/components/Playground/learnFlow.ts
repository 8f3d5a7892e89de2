// The learn flow as a state machine: submitted → training (the job polled) → finding model n+1
// → learned, with the old model's last answer kept as "before"; or failed, with the reason.
// Also which model slots switch to the new model (and back), and the lineage line.
import type { Message } from './feedback'
import { isFinal, LEARNS, type Job, type LearnChoice, type ModelDetail } from './learn'

/** One answer of the conversation: what was asked (system, turns, the last user prompt) and
 *  what the model said. The panels report the latest; "before" is the learner's. */
export interface Exchange {
  model: string
  context: Message[]
  answer: string
}

export interface LearnRequest {
  /** The library model that learns (mdl_...). */
  learner: string
  learnerName: string
  choice: LearnChoice
  steps: number
}

export type LearnState =
  | { phase: 'idle' }
  | { phase: 'submitting'; request: LearnRequest }
  | { phase: 'training'; request: LearnRequest; job: Job }
  | { phase: 'finding'; request: LearnRequest; job: Job }
  | { phase: 'failed'; request: LearnRequest; job: Job | null; reason: string }
  | { phase: 'learned'; request: LearnRequest; job: Job; model: ModelDetail; before: Exchange | null; using: 'new' | 'old' }

export type LearnEvent =
  | { type: 'submit'; request: LearnRequest }
  /** POST /learn was refused (422, 404): no job. */
  | { type: 'refused'; reason: string }
  /** The job as created, or as polled. */
  | { type: 'job'; job: Job }
  /** Model n+1 was found; `before` is the old model's last answer, kept. */
  | { type: 'found'; model: ModelDetail; before: Exchange | null }
  /** The job succeeded but its model could not be read. */
  | { type: 'lost'; reason: string }
  | { type: 'back' }
  | { type: 'forward' }
  | { type: 'dismiss' }

export const IDLE: LearnState = { phase: 'idle' }

/** Whether a learn is under way (a second one waits for it). */
export const isBusy = (state: LearnState): boolean =>
  state.phase === 'submitting' || state.phase === 'training' || state.phase === 'finding'

function failureReason(job: Job): string {
  if (job.reason) return job.reason
  return job.state === 'cancelled' ? 'the job was cancelled' : `the job ${job.state} without saying why`
}

export function learnReducer(state: LearnState, event: LearnEvent): LearnState {
  switch (event.type) {
    case 'submit':
      return isBusy(state) ? state : { phase: 'submitting', request: event.request }
    case 'refused':
      return state.phase === 'submitting' ? { phase: 'failed', request: state.request, job: null, reason: event.reason } : state
    case 'job': {
      const { job } = event
      // A poll of another job, or one that lands after the job finished, changes nothing.
      if (state.phase === 'submitting' || (state.phase === 'training' && state.job.id === job.id)) {
        if (job.state === 'succeeded') return { phase: 'finding', request: state.request, job }
        if (isFinal(job.state)) return { phase: 'failed', request: state.request, job, reason: failureReason(job) }
        return { phase: 'training', request: state.request, job }
      }
      return state
    }
    case 'found':
      return state.phase === 'finding'
        ? { phase: 'learned', request: state.request, job: state.job, model: event.model, before: event.before, using: 'new' }
        : state
    case 'lost':
      return state.phase === 'finding' ? { phase: 'failed', request: state.request, job: state.job, reason: event.reason } : state
    case 'back':
      return state.phase === 'learned' ? { ...state, using: 'old' } : state
    case 'forward':
      return state.phase === 'learned' ? { ...state, using: 'new' } : state
    case 'dismiss':
      return state.phase === 'failed' || state.phase === 'learned' ? IDLE : state
  }
}

/** "Before": the learner's last answer; else the conversation's last answer, whoever gave it. */
export function pickBefore(exchanges: Exchange[], learner: string): Exchange | null {
  return exchanges.find((e) => e.model === learner) ?? exchanges.at(-1) ?? null
}

/** The last user prompt of a context: what the before/after pair answers. */
export function lastPrompt(context: Message[]): string {
  return [...context].reverse().find((m) => m.role === 'user')?.content ?? ''
}

export type Mode = 'chat' | 'review' | 'ab'

export interface Selection {
  model: string
  a: string
  b: string
}

/** Switch models: every slot that holds `from` takes `to`. The chat has one model, so in chat
 *  mode it switches even when the person picked another one while the job trained. */
export function switchModel(selection: Selection, mode: Mode, from: string, to: string): Selection {
  const swap = (id: string) => (id === from ? to : id)
  const next = { model: swap(selection.model), a: swap(selection.a), b: swap(selection.b) }
  if (mode !== 'ab') next.model = to
  return next
}

/** parent → new model · the feedback dataset's name, version and rows · what it trained. */
export function lineageLine(model: ModelDetail, request: LearnRequest): { parent: string; child: string; data: string } {
  const parent = model.lineage.parent_model
  const picked = request.choice.dataset
  const dataset = model.lineage.dataset
  // The lineage names the dataset version by id; the version and rows are the picked dataset's
  // (a version never changes once stored).
  const same = !dataset || dataset.id === picked.id
  const rows = `${picked.num_rows} row${picked.num_rows === 1 ? '' : 's'}`
  const data = same
    ? `${picked.name} v${picked.version} · ${rows}`
    : `${dataset.name ?? dataset.id} (${dataset.id})`
  return {
    parent: parent?.name ?? parent?.id ?? request.learnerName,
    child: model.name,
    data: `${data} · ${LEARNS[request.choice.kind].wording} · ${request.steps} steps`,
  }
}
