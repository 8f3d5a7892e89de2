// What one can do with a deployment: run a retraining cycle now, put any library model through
// the promotion gate (it is served only if it wins the A/B), or delete it (the name stops
// being served; its logged traffic and feedback go, its datasets and models stay).
import { useState } from 'react'
import { useNavigate } from 'react-router-dom'
import { Modal } from '../ui/Modal'
import { Warning } from '../ui/Warning'
import { cycleOf, historyOf, timeline, type Deployment } from './deployments'
import { useDeleteDeployment, useDeploymentAction, useModels } from './queries'

export function DeploymentActions({ deployment: d, modelName }: { deployment: Deployment; modelName: (id: string) => string }) {
  const action = useDeploymentAction(d.name)
  const remove = useDeleteDeployment(d.name)
  const navigate = useNavigate()
  const [promoting, setPromoting] = useState(false)
  const [before, setBefore] = useState<number | null>(null)
  const busy = !!cycleOf(d)
  const cycle = () => {
    setBefore(d.history.length)
    action.mutate({ type: 'cycle' })
  }
  const confirmDelete = () => {
    if (window.confirm(`Delete ${d.name}? /v1 stops serving the name and its logged traffic and feedback are deleted; its datasets and models stay.`)) {
      remove.mutate(undefined, { onSuccess: () => navigate('/models?view=deployments') })
    }
  }
  // What the last "Run cycle now" did, in a line: the event it recorded.
  const [latest] = timeline(historyOf(d))
  const answered = action.isSuccess && action.variables?.type === 'cycle' && before !== null && d.history.length > before ? latest : null
  return (
    <div className="flex flex-col items-end gap-2">
      <div className="flex flex-wrap justify-end gap-2">
        <button type="button" className="btn-cta" disabled={busy || action.isPending} onClick={cycle}
          title={busy ? 'A cycle is in flight: wait for it' : 'Turn the new feedback into a candidate now, whatever the schedule says'}>
          {action.isPending && action.variables?.type === 'cycle' ? 'Starting…' : 'Run cycle now'}
        </button>
        <button type="button" className="btn-ghost" disabled={busy} onClick={() => setPromoting(true)}
          title={busy ? 'A cycle is in flight: wait for it' : 'Put a library model through the promotion gate'}>
          Promote a model…
        </button>
        <button type="button" className="btn-ghost hover:border-bad hover:text-bad" disabled={remove.isPending} onClick={confirmDelete}>Delete</button>
      </div>
      {answered && (
        <p role="status" className="max-w-md text-right text-xs text-neutral-400" data-testid="cycle-answer">
          {answered.title}: {answered.detail}
        </p>
      )}
      {(action.isError || remove.isError) && (
        <p role="alert" className="max-w-md text-right text-sm text-bad">{action.error?.message ?? remove.error?.message}</p>
      )}
      {promoting && <PromoteDialog deployment={d} modelName={modelName} onClose={() => setPromoting(false)} />}
    </div>
  )
}

/** "Promote a model…": pick a library model; an eval job on the eval set puts the served
 *  model (A) against it (B), and it is served only if B wins significantly. */
function PromoteDialog({ deployment: d, modelName, onClose }: { deployment: Deployment; modelName: (id: string) => string; onClose: () => void }) {
  const models = (useModels({}).data?.data ?? []).filter((m) => m.id !== d.model_id)
  const action = useDeploymentAction(d.name)
  const [modelId, setModelId] = useState('')
  const served = modelName(d.model_id)
  return (
    <Modal title="Promote a model" onClose={onClose}>
      <p className="text-sm text-neutral-400">
        The model goes through the promotion gate: an eval job on the deployment's eval set puts <b className="font-mono text-neutral-200">{served}</b> (A,
        served now) against it (B). It is served only if it <b className="text-neutral-200">wins the A/B</b>: significantly better (p &lt; 0.05, a win rate above
        50%). Otherwise it is refused and {served} stays. The outcome lands in the history.
      </p>
      {!d.eval_dataset_id && (
        <div className="mt-3"><Warning>This deployment has no eval set: the gate would refuse any model. Choose one in its settings first.</Warning></div>
      )}
      <label className="mt-4 block">
        <span className="label">Model (B)</span>
        <select className="input" aria-label="Model to promote" value={modelId} onChange={(e) => setModelId(e.target.value)}>
          <option value="">choose a library model…</option>
          {models.map((m) => <option key={m.id} value={m.id}>{m.name} · {m.base_model} · step {m.step}</option>)}
        </select>
      </label>
      {action.isError && <p role="alert" className="mt-3 text-sm text-bad">Not started: {action.error.message}</p>}
      <div className="mt-5 flex justify-end gap-2">
        <button type="button" className="btn-ghost" onClick={onClose}>Cancel</button>
        <button type="button" className="btn-cta" disabled={!modelId || !d.eval_dataset_id || action.isPending}
          onClick={() => action.mutate({ type: 'promote', modelId }, { onSuccess: onClose })}>
          {action.isPending ? 'Starting the gate…' : 'Put it through the gate'}
        </button>
      </div>
    </Modal>
  )
}
