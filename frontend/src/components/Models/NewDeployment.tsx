// The "New deployment" dialog: a name, the library model it serves, and its loop's settings;
// the server's refusal (a taken name, a cron expression it cannot read, a hook it cannot
// import) is shown as it says it.
import { useState } from 'react'
import { Modal } from '../ui/Modal'
import { DeploymentFields } from './DeploymentFields'
import { createBody, emptyForm, formProblems, type Deployment, type DeploymentForm } from './deployments'
import { useCreateDeployment } from './queries'

interface Props {
  /** The model to start with (a model page's "Deploy"). */
  modelId?: string
  onClose: () => void
  onCreated: (d: Deployment) => void
}

export function NewDeployment({ modelId = '', onClose, onCreated }: Props) {
  const [form, setForm] = useState<DeploymentForm>(() => ({ ...emptyForm(), modelId }))
  const [tried, setTried] = useState(false)
  const create = useCreateDeployment()
  const problems = formProblems(form, true)
  const valid = Object.keys(problems).length === 0
  const submit = () => {
    setTried(true)
    if (valid) create.mutate(createBody(form), { onSuccess: onCreated })
  }
  return (
    <Modal title="New deployment" onClose={onClose} wide>
      <p className="mb-4 text-sm text-neutral-400">
        Serve a library model under a name apps call through the OpenAI-compatible <code className="text-accent">/v1</code> API. Logging its
        traffic is opt-in; with feedback on that traffic, a cycle trains a candidate, and the gate serves it only if it wins an A/B.
      </p>
      <form onSubmit={(e) => { e.preventDefault(); submit() }}>
        {/* Problems show once a create was tried: an empty form is not an error. */}
        <DeploymentFields id="nd" form={form} onChange={(patch) => setForm((f) => ({ ...f, ...patch }))} problems={tried ? problems : {}} creating />
        {create.isError && <p role="alert" className="mt-4 text-sm text-bad">Not created: {create.error.message}</p>}
        <div className="mt-5 flex justify-end gap-2">
          <button type="button" className="btn-ghost" onClick={onClose}>Cancel</button>
          <button type="submit" className="btn-cta" disabled={create.isPending || (tried && !valid)}>
            {create.isPending ? 'Creating…' : 'Create deployment'}
          </button>
        </div>
      </form>
    </Modal>
  )
}
