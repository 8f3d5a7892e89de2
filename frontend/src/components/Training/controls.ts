// Which of pause, resume and cancel a job's state allows (the states the server accepts each
// in, HOW_TO_USE.md "Jobs"), and what a pause now would lose.
import { LIVE_STATES, UNFINISHED_STATES, type JobState } from '../../api/vocabulary'
import type { Job, JobAction } from './queries'
import { isSdkRun } from './sdkRun'

const CAN: Record<Exclude<JobAction, 'resume'>, readonly JobState[]> = {
  pause: LIVE_STATES,
  cancel: UNFINISHED_STATES,
}

/** Whether `action` can be asked of `job` now: resume only when the server says it can help
 * (`retryable`: not for a job whose settings, data or model are at fault). */
export function allows(job: Job, action: JobAction): boolean {
  // An SDK run's loop is its client's: stop it, but there is nothing here to pause.
  if (action === 'pause' && isSdkRun(job)) return false
  return action === 'resume' ? job.retryable === true : CAN[action].includes(job.state)
}

/** What a pause now would lose: resume continues from the last checkpoint, so before the
 * first one it starts again from step 0 (and the earlier attempt's curve is dropped). */
export function pauseNote(job: Job): string | null {
  const every = Number((job.config as Record<string, unknown>).save_every)
  if (job.state !== 'running' || !Number.isFinite(every) || every <= 0) return null
  if (job.step < every) return `No checkpoint yet (the first comes at step ${every}): paused now, it starts again from step 0.`
  return `Paused now, it resumes from step ${Math.floor(job.step / every) * every}, the last checkpoint.`
}

