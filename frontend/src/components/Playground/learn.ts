// "Learn from this": the feedback datasets a model can learn from (the newest version of each
// lineage: preference pairs train DPO, chat rows SL), the dialog's default and its request
// body (POST /api/models/{id}/learn), and the lookups of the job and of the model it made.
import { api, unwrap, type Schemas } from '../../api/client'
import type { JobState } from '../../api/vocabulary'
import type { FeedbackKind } from './feedback'
import type { LastTarget } from './feedbackTarget'
import type { Dataset } from './saveFeedback'

export type Job = Schemas['JobPublic']
export type ModelDetail = Schemas['ModelDetail']
export type LearnBody = Schemas['LearnRequest']

/** The server's default: a short update (seconds on the tiny model). */
export const DEFAULT_STEPS = 30
export const MAX_STEPS = 10_000

/** What each kind of feedback trains, in the words of what the person did to make it. */
export const LEARNS: Record<FeedbackKind, { algorithm: 'DPO' | 'SL'; wording: string; how: string }> = {
  preferences: {
    algorithm: 'DPO',
    wording: 'DPO on your A/B choices',
    how: 'each preferred answer is made more likely than the one you passed over',
  },
  chat: {
    algorithm: 'SL',
    wording: 'SL on your good and edited answers',
    how: 'the model is trained to write the answers you marked good or corrected',
  },
}

export function isFeedbackKind(kind: string): kind is FeedbackKind {
  return kind === 'preferences' || kind === 'chat'
}

/** The line a dataset's kind gets in the dialog: what learning from it does. */
export function learnWording(kind: string): string {
  return isFeedbackKind(kind) ? LEARNS[kind].wording : `${kind} rows are not feedback: a model cannot learn from them here`
}

export interface LearnChoice {
  dataset: Dataset
  kind: FeedbackKind
  wording: string
}

/** Every dataset to learn from, preference pairs first: `preferences` and `chat` are already
 *  the newest version of each lineage (saveFeedback.listTargets), as feedback is appended. */
export function learnChoices(preferences: Dataset[], chat: Dataset[]): LearnChoice[] {
  const of = (kind: FeedbackKind) => (dataset: Dataset): LearnChoice => ({ dataset, kind, wording: LEARNS[kind].wording })
  return [...preferences.map(of('preferences')), ...chat.map(of('chat'))]
}

/** The dataset the dialog starts on: the one feedback was last saved to, else the last one of
 *  the kind this mode makes (A/B: preferences, chat: chat rows), else of the other kind, else
 *  the person's own (not an example) dataset of that kind; null when there is nothing of theirs. */
export function defaultChoice(
  choices: LearnChoice[],
  target: { last: LastTarget | null; roots: Partial<Record<FeedbackKind, string>> },
  prefer: FeedbackKind,
): string | null {
  const other: FeedbackKind = prefer === 'chat' ? 'preferences' : 'chat'
  const inLineage = (kind: FeedbackKind, root: string | undefined) =>
    root ? choices.find((c) => c.kind === kind && (c.dataset.root_id ?? c.dataset.id) === root) : undefined
  const found =
    (target.last && inLineage(target.last.kind, target.last.root)) ||
    inLineage(prefer, target.roots[prefer]) ||
    inLineage(other, target.roots[other]) ||
    choices.find((c) => c.kind === prefer && !c.dataset.builtin) ||
    choices.find((c) => !c.dataset.builtin)
  return found?.dataset.id ?? null
}

/** The steps field: a whole number of optimizer steps, 1 to 10,000. */
export function parseSteps(text: string): { steps: number; error: null } | { steps: null; error: string } {
  const value = Number(text.trim())
  if (!text.trim() || !Number.isInteger(value)) return { steps: null, error: 'a whole number of steps' }
  if (value < 1 || value > MAX_STEPS) return { steps: null, error: `1 to ${MAX_STEPS.toLocaleString('en')} steps` }
  return { steps: value, error: null }
}

/** POST /api/models/{id}/learn's body; the learning rate is left to the server's proposal and
 *  the name to its default ("<model>+feedback"). */
export function learnBody(datasetId: string, steps: number): LearnBody {
  return { dataset_id: datasetId, max_steps: steps }
}

/** The states after which a job no longer moves; paused and interrupted jobs may resume. */
export const FINAL_STATES: readonly JobState[] = ['succeeded', 'failed', 'cancelled']
export const isFinal = (state: JobState | undefined): boolean => !!state && FINAL_STATES.includes(state)

/** Where a learning job is, in one line: "step 12 / 30", or its state before it trains. */
export function progressLine(job: Job): string {
  if (job.state === 'queued') return 'queued, ahead of ordinary jobs'
  if (job.state === 'starting') return 'starting a worker'
  const total = job.total_steps ?? null
  return total ? `step ${job.step} / ${total}` : `step ${job.step}`
}

export function progressFraction(job: Job): number {
  if (job.state === 'succeeded') return 1
  return job.total_steps ? job.step / job.total_steps : job.progress ?? 0
}

export async function startLearning(modelId: string, body: LearnBody): Promise<Job> {
  return unwrap(await api.POST('/api/models/{model_id}/learn', { params: { path: { model_id: modelId } }, body }))
}

export async function readJob(jobId: string): Promise<Job> {
  return unwrap(await api.GET('/api/jobs/{job_id}', { params: { path: { job_id: jobId } } }))
}

/** Model n+1: the model a learning job registered (newest first), with its lineage. */
export async function findLearnedModel(jobId: string): Promise<ModelDetail> {
  const page = unwrap(await api.GET('/api/models', { params: { query: { job_id: jobId, limit: 10 } } }))
  const made = page.data[0]
  if (!made) throw new Error(`job ${jobId} succeeded but registered no model`)
  return unwrap(await api.GET('/api/models/{model_id}', { params: { path: { model_id: made.id } } }))
}
