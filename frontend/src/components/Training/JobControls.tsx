// Pause / resume / cancel, each shown only in the states the server accepts it in
// (HOW_TO_USE.md "Jobs"); resume only when the server says it can help (`retryable`: not for a
// job whose settings, data or model are at fault); cancel asks first, it cannot be undone.
import { useState } from 'react'
import { errorMessage } from '../../api/client'
import { allows, pauseNote } from './controls'
import { isSdkRun } from './sdkRun'
import { useJobAction, type Job, type JobAction } from './queries'
import { Modal } from '../ui/Modal'

export function JobControls({ job }: { job: Job }) {
  const action = useJobAction(job.id)
  const [confirm, setConfirm] = useState(false)
  const can = (a: JobAction) => allows(job, a)
  const sdk = isSdkRun(job)
  return (
    <div className="flex flex-col items-end gap-2">
      <div className="flex gap-2">
        {can('pause') && (
          <button type="button" className="btn-ghost" disabled={action.isPending} onClick={() => action.mutate('pause')}>
            Pause
          </button>
        )}
        {can('resume') && (
          <button type="button" className="btn-cta" disabled={action.isPending} onClick={() => action.mutate('resume')}>
            Resume
          </button>
        )}
        {can('cancel') && (
          <button
            type="button"
            className="btn border border-bad/50 text-bad hover:bg-bad/10"
            disabled={action.isPending}
            onClick={() => setConfirm(true)}
          >
            {sdk ? 'Stop run' : 'Cancel job'}
          </button>
        )}
      </div>
      {can('pause') && pauseNote(job) && <p className="max-w-xs text-right text-xs text-neutral-500">{pauseNote(job)}</p>}
      {action.isError && <p role="alert" className="text-xs text-bad">{errorMessage(action.error)}</p>}
      {confirm && (
        <Modal title={`${sdk ? 'Stop' : 'Cancel'} "${job.name}"?`} onClose={() => setConfirm(false)}>
          {sdk ? (
            <p className="text-sm text-neutral-300">
              The run ends as <b>cancelled</b> now: the Tinker SDK client's pending and next
              calls fail with <i>this run was stopped from the Thinker dashboard</i>. Checkpoints
              it saved stay in the Models library; the client can load a saved state to go on.
            </p>
          ) : (
            <p className="text-sm text-neutral-300">
              The worker stops at its next step and the job ends as <b>cancelled</b>. Checkpoints
              already saved stay in the Models library, but a cancelled job cannot be resumed.
              To stop for now and continue later, use <b>Pause</b> instead.
            </p>
          )}
          <div className="mt-5 flex justify-end gap-2">
            <button type="button" className="btn-ghost" onClick={() => setConfirm(false)}>Keep training</button>
            <button
              type="button"
              className="btn bg-bad text-white hover:brightness-110"
              onClick={() => {
                setConfirm(false)
                action.mutate('cancel')
              }}
            >
              {sdk ? 'Yes, stop the run' : 'Yes, cancel the job'}
            </button>
          </div>
        </Modal>
      )}
    </div>
  )
}
