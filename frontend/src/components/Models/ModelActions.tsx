// What one can do with a model: sample it, train it further (a reward model: retrain it),
// evaluate it against its base model, deploy it under a name, download its adapter, export it
// merged, compare it, delete it. Tinker models answer 409 for the file actions; the message
// says why.
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useNavigate } from 'react-router-dom'
import { api, errorMessage, unwrap } from '../../api/client'
import { downloadFile } from '../Datasets/http'
import { formatBytes } from '../Datasets/format'
import type { ModelDetail } from './queries'

export function ModelActions({ model }: { model: ModelDetail }) {
  const [error, setError] = useState<string | null>(null)
  const remove = useDeleteModel(model.id)
  const adapter = () =>
    downloadFile(`/api/models/${model.id}/adapter`, `${model.name}-adapter.zip`).then(() => setError(null), (e: unknown) => setError(errorMessage(e)))
  const confirmDelete = () => {
    if (window.confirm(`Delete ${model.name}? Its sampler weights and export are removed; the job's training state is kept.`)) remove.mutate()
  }
  return (
    <div className="flex flex-col items-end gap-2">
      <div className="flex flex-wrap justify-end gap-2">
        <Link to={`/playground?model=${encodeURIComponent(model.id)}`} className="btn-cta">Open in playground</Link>
        {model.stage === 'rm' ? (
          <Link to={retrainLink(model)} className="btn-ghost" title="An rm job that retrains this reward model on preference pairs">
            Retrain
          </Link>
        ) : model.backend === 'local' && (
          <Link to={`/training/wizard?from=${encodeURIComponent(model.id)}`} className="btn-ghost" title="A new job that starts from this model's weights">
            Train further
          </Link>
        )}
        <Link to={evaluateLink(model)} className="btn-ghost" title="An eval job comparing it with its base model on an eval set, with significance">
          Evaluate
        </Link>
        <Link to={`/models?${new URLSearchParams({ view: 'deployments', deploy: model.id })}`} className="btn-ghost"
          title="Serve it to your apps under a name through /v1, with an opt-in retraining loop">
          Deploy
        </Link>
        <button type="button" className="btn-ghost" onClick={adapter}>Download adapter</button>
        <button type="button" className="btn-ghost hover:border-bad hover:text-bad" disabled={remove.isPending} onClick={confirmDelete}>Delete</button>
      </div>
      {(error || remove.isError) && <p role="alert" className="max-w-md text-right text-sm text-bad">{error ?? remove.error?.message}</p>}
    </div>
  )
}

/** The new-job form of an rm job that retrains this reward model, on its backend. */
function retrainLink(model: ModelDetail): string {
  return `/training/new?${new URLSearchParams({ algorithm: 'rm', base_model: model.id, backend: model.backend })}`
}

/** The new-job form of an eval job: this model against its base model, on its backend. */
function evaluateLink(model: ModelDetail): string {
  const query = new URLSearchParams({ algorithm: 'eval', base_model: model.base_model, models: model.id, backend: model.backend })
  return `/training/new?${query}`
}

function useDeleteModel(id: string) {
  const client = useQueryClient()
  const navigate = useNavigate()
  return useMutation({
    mutationFn: async () => {
      const { error, response } = await api.DELETE('/api/models/{model_id}', { params: { path: { model_id: id } } })
      if (!response.ok) throw new Error(errorMessage(error ?? `HTTP ${response.status}`))
    },
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ['models'] })
      navigate('/models')
    },
  })
}

/** Export merged: the merge runs on the server's CPU; once done, the zip can be downloaded. */
export function ExportPanel({ model }: { model: ModelDetail }) {
  const client = useQueryClient()
  const [downloadError, setDownloadError] = useState<string | null>(null)
  const exporting = useMutation({
    mutationFn: async () => unwrap(await api.POST('/api/models/{model_id}/export', { params: { path: { model_id: model.id } } })),
    onSuccess: (result) => client.setQueryData(['model', model.id], { ...model, export: result }),
  })
  const done = model.export ?? exporting.data
  const download = () =>
    downloadFile(`/api/models/${model.id}/export/download`, `${model.name}-merged.zip`).catch((e: unknown) => setDownloadError(errorMessage(e)))
  return (
    <div className="flex flex-col gap-3 text-sm">
      <p className="text-neutral-400">
        Folds the LoRA adapter into the base model's weights: a full model (safetensors, fp32) with its tokenizer, usable
        as a base model or with <code className="font-mono text-accent">AutoModelForCausalLM.from_pretrained</code>.
      </p>
      {done ? (
        <>
          <div className="rounded-xl border border-ok/40 bg-ok/5 p-3">
            <div className="font-mono text-xs text-neutral-300">{done.path}</div>
            <div className="mt-1 text-xs text-neutral-500">{done.files.length} files · {formatBytes(done.size_bytes)}</div>
          </div>
          <button type="button" className="btn-cta self-start" onClick={download}>Download merged model (.zip)</button>
        </>
      ) : (
        <button type="button" className="btn-ghost self-start" disabled={exporting.isPending} onClick={() => exporting.mutate()}>
          {exporting.isPending ? 'Merging… (on the CPU; this can take a while)' : 'Export merged model'}
        </button>
      )}
      {(exporting.isError || downloadError) && <p role="alert" className="text-bad">{exporting.error?.message ?? downloadError}</p>}
    </div>
  )
}
