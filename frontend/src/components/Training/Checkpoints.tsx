// A job's checkpoints, each with the model it became in the library (GET /api/models?job_id=).
import { Link } from 'react-router-dom'
import { Empty, ErrorState, Loading } from '../ui/States'
import { formatValue } from '../../lib/metrics'
import { useCheckpoints, useJobModels } from './queries'

interface Checkpoint {
  name?: string
  step?: number
  stage?: string
  sampler_path?: string
  state_path?: string | null
  time?: number
}

export function Checkpoints({ jobId }: { jobId: string }) {
  const checkpoints = useCheckpoints(jobId)
  const models = useJobModels(jobId)
  if (checkpoints.isLoading) return <Loading what="checkpoints" />
  if (checkpoints.isError) return <ErrorState error={checkpoints.error} what="checkpoints" />
  const rows = (checkpoints.data?.data ?? []) as Checkpoint[]
  if (!rows.length) {
    return (
      <Empty
        title="No checkpoints yet"
        next={<>A checkpoint is saved every <code>save_every</code> steps and at the end; each one becomes a model you can open in the Playground.</>}
      />
    )
  }
  const modelFor = (c: Checkpoint) =>
    models.data?.data.find((m) => m.sampler_path === c.sampler_path) ??
    models.data?.data.find((m) => m.step === c.step && (m.stage ?? undefined) === c.stage)
  return (
    <div className="card overflow-x-auto p-0">
      <table className="w-full text-sm">
        <thead className="text-left text-xs uppercase tracking-wider text-neutral-500">
          <tr className="border-b border-ink-700">
            <th className="px-4 py-2">Checkpoint</th>
            <th className="px-4 py-2">Step</th>
            <th className="px-4 py-2">Saved</th>
            <th className="px-4 py-2">Metrics at this step</th>
            <th className="px-4 py-2">Model</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((c) => {
            // A Tinker SDK client's save_state: a training state, no sampler weights to chat with.
            const stateOnly = Boolean(c.state_path) && !c.sampler_path
            const model = stateOnly ? undefined : modelFor(c)
            const metrics = Object.entries(model?.metrics ?? {}).filter(([k, v]) => typeof v === 'number' && k !== 'step' && k !== 'time').slice(0, 3)
            return (
              <tr key={`${c.stage ?? ''}${c.name}`} className="border-b border-ink-800 last:border-0">
                <td className="px-4 py-2 font-mono text-xs text-neutral-300">
                  {c.stage && <span className="mr-2 rounded bg-ink-700 px-1.5 py-0.5 text-accent">{c.stage}</span>}
                  {c.name}
                </td>
                <td className="px-4 py-2">{c.step}</td>
                <td className="px-4 py-2 text-xs text-neutral-400">{c.time ? new Date(c.time * 1000).toLocaleTimeString() : '—'}</td>
                <td className="px-4 py-2 font-mono text-xs text-neutral-400">
                  {metrics.map(([k, v]) => `${k}=${formatValue(v as number)}`).join('  ') || '—'}
                </td>
                <td className="px-4 py-2">
                  {model ? (
                    <span className="flex gap-3">
                      <Link className="text-accent hover:underline" to={`/models/${model.id}`}>{model.name}</Link>
                      <Link className="text-cta hover:underline" to={`/playground?model=${encodeURIComponent(model.id)}`}>Open in playground →</Link>
                    </span>
                  ) : (
                    <span className="text-xs text-neutral-500">{stateOnly ? 'training state only' : c.stage === 'rm' ? 'the judge (not a chat model)' : 'registering…'}</span>
                  )}
                </td>
              </tr>
            )
          })}
        </tbody>
      </table>
    </div>
  )
}
