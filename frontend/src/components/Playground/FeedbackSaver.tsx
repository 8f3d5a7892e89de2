// Saving one feedback row: pick a dataset of the right kind (or name a new one), save, and say
// exactly where it went (dataset, version, rows) so it can train the next job.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { errorMessage } from '../../api/client'
import { kindOf, type FeedbackRow } from './feedback'
import { useFeedbackTarget } from './feedbackTarget'
import { appendFeedback, createFeedbackDataset, listTargets, type Dataset } from './saveFeedback'

const NEW = '__new__'
const DEFAULT_NAME = { chat: 'feedback-demonstrations', preferences: 'feedback-preferences' } as const
const WHAT = {
  chat: 'a demonstration (chat row): the conversation and the answer — trains with SL',
  preferences: 'a preference pair (preferences row): prompt, chosen, rejected — trains with DPO or an RLHF reward model',
} as const

interface Props {
  row: FeedbackRow
  onClose: () => void
}

export function FeedbackSaver({ row, onClose }: Props) {
  const kind = kindOf(row)
  const client = useQueryClient()
  const { roots, remember } = useFeedbackTarget()
  const targets = useQuery({ queryKey: ['feedback-targets', kind], queryFn: () => listTargets(kind) })
  const [choice, setChoice] = useState<string | null>(null)
  const [name, setName] = useState<string>(DEFAULT_NAME[kind])
  const remembered = targets.data?.find((d) => (d.root_id ?? d.id) === roots[kind])
  const selected = choice ?? remembered?.id ?? NEW
  const save = useMutation({
    mutationFn: (): Promise<Dataset> =>
      selected === NEW ? createFeedbackDataset(name.trim(), row, kind) : appendFeedback(selected, row),
    onSuccess: (saved) => {
      remember(kind, saved.root_id ?? saved.id)
      client.invalidateQueries({ queryKey: ['feedback-targets'] })
      client.invalidateQueries({ queryKey: ['datasets'] })
    },
  })
  return (
    <div role="dialog" aria-label="Save feedback" className="fixed inset-0 z-40 flex items-center justify-center bg-black/60 backdrop-blur-sm">
      <div className="card w-[640px] max-w-[95vw] shadow-[0_0_40px_rgba(14,165,233,0.15)]">
        <h3 className="text-lg font-semibold text-neutral-100">Save feedback</h3>
        <p className="mt-1 text-sm text-neutral-400">This saves {WHAT[kind]}.</p>
        <pre className="mt-3 max-h-48 overflow-auto rounded-xl bg-ink-950 p-3 font-mono text-xs text-neutral-300">
          {JSON.stringify(row, null, 2)}
        </pre>
        {save.isSuccess ? (
          <Saved dataset={save.data} onClose={onClose} />
        ) : (
          <>
            <div className="mt-4 grid grid-cols-2 gap-3">
              <label className="block">
                <span className="label">Dataset ({kind})</span>
                <select className="input" value={selected} onChange={(e) => setChoice(e.target.value)} aria-label="Feedback dataset">
                  <option value={NEW}>+ New dataset…</option>
                  {targets.data?.map((d) => (
                    <option key={d.id} value={d.id}>
                      {d.name} · v{d.version} · {d.num_rows} rows{d.builtin ? ' (example)' : ''}
                    </option>
                  ))}
                </select>
              </label>
              {selected === NEW && (
                <label className="block">
                  <span className="label">New dataset name</span>
                  <input className="input" value={name} onChange={(e) => setName(e.target.value)} aria-label="New dataset name" />
                </label>
              )}
            </div>
            {targets.isError && <p className="mt-2 text-xs text-bad">Could not list datasets: {errorMessage(targets.error)}</p>}
            {save.isError && <p role="alert" className="mt-3 text-sm text-bad">Not saved: {errorMessage(save.error)}</p>}
            <div className="mt-5 flex justify-end gap-2">
              <button className="btn-ghost" onClick={onClose}>Cancel</button>
              <button className="btn-cta" disabled={save.isPending || (selected === NEW && !name.trim())} onClick={() => save.mutate()}>
                {save.isPending ? 'Saving…' : selected === NEW ? 'Create dataset' : 'Append as a new version'}
              </button>
            </div>
          </>
        )}
      </div>
    </div>
  )
}

function Saved({ dataset, onClose }: { dataset: Dataset; onClose: () => void }) {
  return (
    <div role="status" className="mt-4 rounded-xl border border-cta/50 bg-cta/10 p-4 text-sm">
      <p className="flex items-center gap-2 font-medium text-cta">
        <span className="led bg-cta shadow-[0_0_8px_#14b8a6]" /> Saved to {dataset.name} · version {dataset.version}
      </p>
      <p className="mt-1 text-neutral-300">
        <code className="text-accent">{dataset.id}</code> now holds {dataset.num_rows} row{dataset.num_rows === 1 ? '' : 's'}.
        Pick it as the dataset of your next job to train on this feedback.
      </p>
      <div className="mt-3 flex gap-2">
        <Link className="btn-ghost" to="/datasets">Open Datasets</Link>
        <Link className="btn-ghost" to="/training">Train a job</Link>
        <button className="btn-cta ml-auto" onClick={onClose}>Done</button>
      </div>
    </div>
  )
}
