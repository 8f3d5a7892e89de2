// A Tinker SDK client's run (the server's `tinker_sdk` jobs): its loop lives in the client,
// which trains over `thinker serve`'s Tinker protocol, so it has no plan, no worker log and no
// report; it can be stopped (its client's next call then fails) but not paused or resumed.
import type { Job } from './queries'

/** Whether a job is a Tinker SDK client's run. */
export function isSdkRun(job: Pick<Job, 'algorithm'>): boolean {
  return job.algorithm === 'tinker_sdk'
}
