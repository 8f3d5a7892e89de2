// A review job (`review`): the last checkpoints of a reward model (a committee) score every pair
// of a preferences dataset, and the pairs they are least sure of make a queue that a person
// answers blind (GET /api/jobs/{id}/review). Once answered, a pair shows which answer the dataset
// chose and the reward model's P(A beats B); the answers make a new version of the dataset (POST
// .../review/dataset) to retrain the reward model on (an rm job from it). It trains nothing.
// What the review's views compute, here: ReviewQueue.tsx and ReviewSection.tsx show it.
import type { Schemas } from '../../api/client'
import type { Job } from '../Training/queries'
import type { ModelDetail } from './queries'

export type Review = Schemas['ReviewPublic']
export type ReviewItem = Schemas['ReviewItem']
export type ReviewSummary = Schemas['ReviewSummary']
export type Calibration = Schemas['Calibration']
export type CalibrationBin = Schemas['CalibrationBin']
/** A person's answer: the better answer as shown, or a tie. */
export type Choice = Schemas['ReviewAnswerBody']['choice']

export const CHOICES: { id: Choice; label: string }[] = [
  { id: 'a', label: 'A is better' },
  { id: 'b', label: 'B is better' },
  { id: 'tie', label: 'Tie' },
]

/** Whether a job reviews a reward model. */
export function isReviewJob(job: Pick<Job, 'algorithm'>): boolean {
  return job.algorithm === 'review'
}

/** A checkpoint of the committee by its weights (a directory or tinker:// path whose last part
 * is the step, `000100`): "step 100", else that last part. */
export function checkpointLabel(weights: string): string {
  const name = weights.replace(/\/+$/, '').split('/').pop() || weights
  return /^\d+$/.test(name) ? `step ${Number(name)}` : name
}

/** The answer a probability P(A beats B) prefers. */
export function preferred(p: number): Choice {
  return p > 0.5 ? 'a' : p < 0.5 ? 'b' : 'tie'
}

/** How the person's answer stands against the dataset's label, or null before it is answered
 * (the label is hidden until then). */
export function agreement(item: Pick<ReviewItem, 'answer' | 'label'>): 'agree' | 'disagree' | 'tie' | null {
  if (item.answer === null || item.label === null) return null
  if (item.answer === 'tie') return 'tie'
  return item.answer === item.label ? 'agree' : 'disagree'
}

/** The review with one pair as PUT .../review/{pair} answered it (its label and probabilities
 * revealed), and the answers recounted. */
export function withAnswer(review: Review, item: ReviewItem): Review {
  const data = review.data.map((row) => (row.pair === item.pair ? item : row))
  return { ...review, data, answered: data.filter((row) => row.answer !== null).length }
}

/** A prompt message's text: its content as written, or the JSON of its parts. */
export function messageText(content: unknown): string {
  return typeof content === 'string' ? content : JSON.stringify(content)
}

/** A prompt's messages, each with its role and text. */
export function promptMessages(prompt: ReviewItem['prompt']): { role: string; text: string }[] {
  return prompt.map((m) => ({ role: typeof m.role === 'string' ? m.role : '?', text: messageText(m.content) }))
}

/** A share as a whole percent: 0.625 → "63%". */
export function share(value: number | null | undefined): string {
  return typeof value === 'number' && Number.isFinite(value) ? `${Math.round(value * 100)}%` : '—'
}

/** A bin's range of confidences: "50–60%". */
export function binRange(bin: Pick<CalibrationBin, 'low' | 'high'>): string {
  return `${Math.round(bin.low * 100)}–${Math.round(bin.high * 100)}%`
}

/** How far a reliability table is from calibrated: within `slack` of its accuracy the model
 * says what it knows; above it, it is overconfident; below it, underconfident. */
export function calibrationVerdict(c: Pick<Calibration, 'confidence' | 'accuracy'>, slack = 0.05): 'calibrated' | 'overconfident' | 'underconfident' {
  const gap = c.confidence - c.accuracy
  return gap > slack ? 'overconfident' : gap < -slack ? 'underconfident' : 'calibrated'
}

/** The review to show first: the newest that finished, else the newest (jobs newest first). */
export function latestReview<J extends Pick<Job, 'state'>>(jobs: readonly J[]): J | null {
  return jobs.find((j) => j.state === 'succeeded') ?? jobs[0] ?? null
}

/** The POST /api/jobs body of a review of `model` on a preferences dataset; settings left
 * empty take their defaults. (Typed loosely, as jobRequest.ts's: the generated types call each
 * setting with a default required.) */
export function reviewRequest(
  model: Pick<ModelDetail, 'id' | 'backend'>,
  datasetId: string,
  settings: Readonly<Record<string, string>>,
): Schemas['JobCreate'] {
  const config = Object.fromEntries(
    Object.entries(settings).filter(([, v]) => v.trim() !== '').map(([k, v]) => [k, Number(v.trim())]),
  )
  return { algorithm: 'review', backend: model.backend, base_model: model.id, dataset_id: datasetId, config } as Schemas['JobCreate']
}

/** The POST /api/jobs body that retrains the reviewed reward model on a dataset version made
 * of the review's answers: an rm job from it, its settings proposed by the server. */
export function retrainRequest(review: Pick<Job, 'parent_model_id' | 'backend'>, datasetId: string): Schemas['JobCreate'] {
  return {
    algorithm: 'rm',
    backend: review.backend,
    base_model: review.parent_model_id ?? '',
    dataset_id: datasetId,
    config: {},
  } as Schemas['JobCreate']
}
