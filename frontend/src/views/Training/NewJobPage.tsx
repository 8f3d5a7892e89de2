// /training/new: the full form for users who know what they want. Every key hyperparameter
// starts at the server's default; the JSON editor takes the rest. A refused job shows the
// server's `problems` beside the form; a queued one opens its page.
import { useState } from 'react'
import { Link, useNavigate } from 'react-router-dom'
import { ErrorState, Loading } from '../../components/common/States'
import { AlgorithmInfoButton } from '../../components/Training/AlgorithmInfo'
import { ALGORITHMS, KINDS, PARAMS, RLHF_KINDS, RLHF_STAGE_PARAMS, builtinModels, type Algorithm } from '../../components/Training/algorithms'
import { DatasetSelect, ParamField } from '../../components/Training/fields'
import { buildJobRequest, defaultFields, initialForm, type FormState } from '../../components/Training/jobRequest'
import { useBaseModels, useCreateJob, useDatasets, type CreateJobError } from '../../components/Training/queries'

export function NewJobPage() {
  const navigate = useNavigate()
  const datasets = useDatasets()
  const models = useBaseModels()
  const create = useCreateJob()
  const [form, setForm] = useState<FormState>(() => initialForm())
  const [localProblems, setLocalProblems] = useState<string[]>([])
  const set = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }))
  const builtins = builtinModels(models.data ?? [])
  const preview = buildJobRequest(form)
  const serverProblems = create.isError ? ((create.error as CreateJobError).problems ?? []) : []
  const problems = localProblems.length ? localProblems : serverProblems

  const chooseAlgorithm = (algorithm: Algorithm) =>
    set({ algorithm, params: defaultFields(PARAMS[algorithm]), datasetId: '' })

  const submit = (e: React.FormEvent) => {
    e.preventDefault()
    const { body, problems: found } = buildJobRequest(form)
    setLocalProblems(found)
    if (body) create.mutate(body, { onSuccess: (job) => navigate(`/training/${job.id}`) })
  }

  if (datasets.isLoading) return <Loading what="datasets" />
  if (datasets.isError) return <ErrorState error={datasets.error} what="datasets" />
  const all = datasets.data?.data ?? []

  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-6">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <Link to="/training" className="text-xs text-neutral-500 hover:text-accent">← All jobs</Link>
          <h1 className="text-2xl font-semibold text-neutral-100">New training job</h1>
          <p className="text-sm text-neutral-400">
            Every setting. First time? <Link to="/training/wizard" className="text-cta hover:underline">The wizard</Link> picks them for you.
          </p>
        </div>
        <AlgorithmInfoButton highlight={form.algorithm} />
      </header>
      <form onSubmit={submit} className="grid gap-6 lg:grid-cols-[minmax(0,3fr)_minmax(0,2fr)]">
        <div className="flex flex-col gap-5">
          <section className="card grid gap-4 md:grid-cols-2">
            <div>
              <label htmlFor="nj-algorithm" className="label">Algorithm</label>
              <select id="nj-algorithm" className="input" value={form.algorithm} onChange={(e) => chooseAlgorithm(e.target.value as Algorithm)}>
                {ALGORITHMS.map((a) => <option key={a.id} value={a.id}>{a.short} — {a.name}</option>)}
              </select>
            </div>
            <div>
              <label htmlFor="nj-name" className="label">Name</label>
              <input id="nj-name" className="input" placeholder="optional, e.g. arith-sl" value={form.name} onChange={(e) => set({ name: e.target.value })} />
            </div>
            <div>
              <label htmlFor="nj-backend" className="label">Backend</label>
              <select
                id="nj-backend"
                className="input"
                value={form.backend}
                onChange={(e) => {
                  const backend = e.target.value as FormState['backend']
                  set({ backend, baseModel: backend === 'local' ? 'thinker/tiny' : '' })
                }}
              >
                <option value="local">local — this machine</option>
                <option value="tinker">tinker — Tinker's GPUs (needs the key in Settings)</option>
              </select>
            </div>
            <div>
              <label htmlFor="nj-model" className="label">Base model</label>
              {form.backend === 'local' ? (
                <select id="nj-model" className="input" value={form.baseModel} onChange={(e) => set({ baseModel: e.target.value })}>
                  {(builtins.length ? builtins : ['thinker/tiny']).map((m) => <option key={m}>{m}</option>)}
                </select>
              ) : (
                <input id="nj-model" className="input font-mono" placeholder="e.g. Qwen/Qwen3-8B" value={form.baseModel} onChange={(e) => set({ baseModel: e.target.value })} />
              )}
            </div>
          </section>

          <section className="card grid gap-4 md:grid-cols-3">
            {form.algorithm === 'rlhf' ? (
              <>
                <DatasetSelect id="nj-ds" label="1 · Demonstrations" kinds={RLHF_KINDS.sl} datasets={all} value={form.datasetId} onChange={(v) => set({ datasetId: v })} />
                <DatasetSelect id="nj-ds-rm" label="2 · Preference pairs" kinds={RLHF_KINDS.rm} datasets={all} value={form.rmDatasetId} onChange={(v) => set({ rmDatasetId: v })} />
                <DatasetSelect id="nj-ds-rl" label="3 · RL prompts" kinds={RLHF_KINDS.rl} datasets={all} value={form.rlDatasetId} onChange={(v) => set({ rlDatasetId: v })} />
              </>
            ) : (
              <div className="md:col-span-3">
                <DatasetSelect id="nj-ds" label="Dataset" kinds={KINDS[form.algorithm]} datasets={all} value={form.datasetId} onChange={(v) => set({ datasetId: v })} />
              </div>
            )}
          </section>

          <section className="card">
            <h2 className="mb-3 text-sm font-medium text-neutral-200">Hyperparameters <span className="text-xs text-neutral-500">— prefilled with the server's defaults</span></h2>
            <div className="grid gap-4 sm:grid-cols-2 xl:grid-cols-3">
              {PARAMS[form.algorithm].map((p) => (
                <ParamField key={p.key} id={`nj-${p.key}`} spec={p} value={form.params[p.key] ?? ''} onChange={(v) => set({ params: { ...form.params, [p.key]: v } })} />
              ))}
            </div>
            {form.algorithm === 'rlhf' &&
              (['sl', 'rm', 'rl'] as const).map((s) => (
                <div key={s} className="mt-5">
                  <h3 className="label text-accent">{s === 'sl' ? 'Stage 1 · SL' : s === 'rm' ? 'Stage 2 · reward model' : 'Stage 3 · RL'}</h3>
                  <div className="grid gap-4 sm:grid-cols-2 xl:grid-cols-4">
                    {RLHF_STAGE_PARAMS[s].map((p) => (
                      <ParamField key={p.key} id={`nj-${s}-${p.key}`} spec={p} value={form.stageParams[`${s}.${p.key}`] ?? ''} onChange={(v) => set({ stageParams: { ...form.stageParams, [`${s}.${p.key}`]: v } })} />
                    ))}
                  </div>
                </div>
              ))}
          </section>

          <section className="card">
            <label htmlFor="nj-json" className="label">Other settings (JSON, merged over the fields above)</label>
            <textarea
              id="nj-json"
              spellCheck={false}
              rows={6}
              className="input font-mono text-xs"
              value={form.extraJson}
              onChange={(e) => set({ extraJson: e.target.value })}
            />
            <p className="mt-1 text-xs text-neutral-500">
              Any key of the algorithm's config, e.g. <code>{'{"warmup_steps": 5, "grad_clip_norm": 1.0, "seed": 1}'}</code>
              {form.algorithm === 'rl' && <> or <code>{'{"reward": {"type": "regex", "pattern": "^\\\\d+$"}}'}</code></>}.
              Paths are not accepted: datasets are named by id.
            </p>
          </section>
        </div>

        <aside className="flex flex-col gap-4 lg:sticky lg:top-0 lg:self-start">
          {problems.length > 0 && (
            <section role="alert" className="card border-bad/60">
              <h2 className="font-semibold text-bad">{localProblems.length ? 'Fix these first' : 'The server refused this job'}</h2>
              <ul className="mt-2 list-disc space-y-1 pl-5 text-sm text-neutral-200">
                {problems.map((p) => <li key={p} className="font-mono text-xs">{p}</li>)}
              </ul>
            </section>
          )}
          {create.isError && !problems.length && (
            <section role="alert" className="card border-bad/60 text-sm text-bad">{create.error.message}</section>
          )}
          <section className="card">
            <h2 className="label">Request</h2>
            <pre className="max-h-96 overflow-auto rounded-xl bg-ink-950 p-3 font-mono text-xs text-neutral-300">
              {preview.body ? JSON.stringify(preview.body, null, 2) : preview.problems.join('\n')}
            </pre>
            <button type="submit" className="btn-cta mt-4 w-full justify-center" disabled={create.isPending}>
              {create.isPending ? 'Validating…' : 'Queue the job'}
            </button>
            <p className="mt-2 text-xs text-neutral-500">The server validates everything against the dataset before queueing; nothing is kept if it refuses.</p>
          </section>
        </aside>
      </form>
    </div>
  )
}
