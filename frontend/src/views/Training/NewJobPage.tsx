// /training/new: the full form for users who know what they want. Fields left empty take the
// server's proposal for this data (shown in grey); every number is checked as typed against
// the server's rules, and the job cannot be queued while one is refused. `?from_job=` starts
// from an ended job's settings. A refused job shows the server's `problems` by their fields.
// A batch job trains nothing: no proposal is asked, and its empty fields take their defaults.
// Nor does an eval job: its baseline and the library models it compares, its scorer and its
// sampling settings. `?algorithm=eval&models=mdl_…&base_model=…` opens it with those (a model's
// Evaluate button). An rm job trains a reward model, its empty fields proposed as a training
// job's are. A review is started from a reward model's page.
import { useState } from 'react'
import { Link, useNavigate, useSearchParams } from 'react-router-dom'
import { ErrorState, Loading } from '../../components/ui/States'
import { AlgorithmInfoButton } from '../../components/Training/AlgorithmInfo'
import { bodySchema, configField, configSchema, datasetKinds, RLHF_STAGES, trains } from '../../api/jobConfig'
import { FORM_ALGORITHMS, PARAMS, RLHF_STAGE_PARAMS, type Algorithm } from '../../components/Training/algorithms'
import { problemsAbout, type JobProposal, type ProblemsError } from '../../components/Training/contract'
import { EvalCard, EvalModelPicker, ScorerFields } from '../../components/Training/EvalFields'
import { trainsNothing } from '../../components/Training/evaluation'
import { BaseModelField, DatasetSelect, ParamField } from '../../components/Training/fields'
import { autoResumeError, buildJobRequest, formErrors, formFromJob, formFromSearch, gpusError, maxEvalModels, proposalRequest, scorerTypes, type FormState } from '../../components/Training/jobRequest'
import { useModels } from '../../components/Models/queries'
import { useBaseModels, useCreateJob, useDatasets, useDebounced, useJob, useProposal, type CreateJobError, type Job } from '../../components/Training/queries'
import { NumberField } from '../../components/ui/fields'
import { Warning } from '../../components/ui/Warning'

export function NewJobPage() {
  const [search] = useSearchParams()
  const fromJob = search.get('from_job')
  const source = useJob(fromJob ?? '', !!fromJob)
  if (fromJob && source.isLoading) return <Loading what={`the settings of job ${fromJob}`} />
  const from = fromJob && source.data ? source.data : null
  return (
    <NewJobForm
      key={from?.id ?? 'blank'}
      initial={from ? formFromJob(from) : formFromSearch(search)}
      from={from}
      sourceError={fromJob && source.isError ? `Could not load job ${fromJob}: starting from a blank form.` : null}
    />
  )
}

/** What the server would use for an empty field: its proposal's value. */
function proposed(proposal: JobProposal | undefined, stage: string | null, key: string): unknown {
  const config = proposal?.config
  if (!config) return undefined
  const section = stage ? (config[stage] as Record<string, unknown> | undefined) : config
  return section?.[key]
}

function NewJobForm({ initial, from, sourceError }: { initial: FormState; from: Job | null; sourceError: string | null }) {
  const navigate = useNavigate()
  const datasets = useDatasets()
  const models = useBaseModels()
  const create = useCreateJob()
  const [form, setForm] = useState<FormState>(initial)
  const set = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }))

  // The proposal is asked with the valid fields; the batch rule then needs its training rows.
  const request = useDebounced(proposalRequest(form, formErrors(form, undefined)))
  const proposal = useProposal(request)
  const errors = formErrors(form, proposal.data)
  const preview = buildJobRequest(form)
  const serverProblems = create.isError ? ((create.error as CreateJobError).problems ?? []) : []
  const proposalProblems = proposal.isError ? ((proposal.error as ProblemsError).problems ?? []) : []
  const fieldError = (key: string) => errors[key] ?? problemsAbout(serverProblems, `config.${key}`)[0] ?? null
  const baseModelError =
    (!form.baseModel.trim() ? 'Enter a base model.' : null) ??
    problemsAbout(serverProblems, 'base_model')[0] ??
    problemsAbout(proposalProblems, 'base_model')[0] ??
    null
  const autoResume = configField(bodySchema(form.algorithm), 'auto_resume')
  const autoResumeProblem = autoResumeError(form) ?? problemsAbout(serverProblems, 'auto_resume')[0] ?? null
  const gpus = configField(bodySchema(form.algorithm), 'gpus')
  const gpusProblem = gpusError(form) ?? problemsAbout(serverProblems, 'gpus')[0] ?? null
  const localProblems = [...Object.entries(errors).map(([k, m]) => `${k}: ${m}`), ...preview.problems]
  const canSubmit = localProblems.length === 0 && preview.body !== null && !create.isPending
  const training = !trainsNothing(form)
  const proposes = trains(form.algorithm)
  const evaluating = form.algorithm === 'eval'
  // the library, for an eval job's models (only read once eval is chosen)
  const library = useModels({}, evaluating)
  const libraryModels = (library.data?.data ?? []).filter((m) => m.backend === form.backend)
  const modelNames = new Map((library.data?.data ?? []).map((m) => [m.id, m.name]))
  const modelsProblem = evaluating ? (preview.problems.find((p) => p.startsWith('config.models:'))?.replace('config.models: ', '') ?? problemsAbout(serverProblems, 'config.models')[0] ?? null) : null

  const chooseAlgorithm = (algorithm: Algorithm) => set({ algorithm, params: {}, stageParams: {}, datasetId: '' })

  const submit = (e: React.FormEvent) => {
    e.preventDefault()
    if (canSubmit && preview.body) create.mutate(preview.body, { onSuccess: (job) => navigate(`/training/${job.id}`) })
  }

  if (datasets.isLoading) return <Loading what="datasets" />
  if (datasets.isError) return <ErrorState error={datasets.error} what="datasets" />
  const all = datasets.data?.data ?? []

  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-6">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <Link to="/training" className="text-xs text-neutral-500 hover:text-accent">← All jobs</Link>
          <h1 className="text-2xl font-semibold text-neutral-100">{training ? 'New training job' : evaluating ? 'New evaluation' : 'New batch job'}</h1>
          {evaluating && (
            <p className="text-sm text-neutral-300" data-testid="eval-explainer">
              Models answer the same eval set, each answer is scored, and every pair is compared: significance by a sign test, with a bootstrap interval on the win rate.
            </p>
          )}
          <p className="text-sm text-neutral-400">
            {from ? (
              <>Starting from the settings of <Link to={`/training/${from.id}`} className="text-accent hover:underline">{from.name}</Link>: change {training ? 'what its report asks' : 'what you need'}, then queue it.</>
            ) : evaluating ? (
              <>Trains nothing: pick the eval set, the baseline and the models of your library to compare with it.</>
            ) : (
              <>Every setting. First time? <Link to="/training/wizard" className="text-cta hover:underline">The wizard</Link> picks them for you.</>
            )}
          </p>
          {sourceError && <p role="alert" className="mt-1 text-sm text-warn">{sourceError}</p>}
        </div>
        <AlgorithmInfoButton highlight={form.algorithm} />
      </header>
      <form onSubmit={submit} className="grid gap-6 lg:grid-cols-[minmax(0,3fr)_minmax(0,2fr)]">
        <div className="flex flex-col gap-5">
          <section className="card grid gap-4 md:grid-cols-2">
            <div>
              <label htmlFor="nj-algorithm" className="label">Algorithm</label>
              <select id="nj-algorithm" className="input" value={form.algorithm} onChange={(e) => chooseAlgorithm(e.target.value as Algorithm)}>
                {FORM_ALGORITHMS.map((a) => <option key={a.id} value={a.id}>{a.short} — {a.name}</option>)}
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
            <BaseModelField
              id="nj-model"
              value={form.baseModel}
              onChange={(v) => set({ baseModel: v })}
              options={form.backend === 'local' ? (models.data ?? []) : []}
              placeholder={form.backend === 'local' ? 'e.g. Qwen/Qwen3-0.6B' : 'e.g. Qwen/Qwen3-8B'}
              error={baseModelError}
              evaluate={evaluating}
            />
          </section>

          <section className="card grid gap-4 md:grid-cols-3">
            {form.algorithm === 'rlhf' ? (
              <>
                <DatasetSelect id="nj-ds" label="1 · Demonstrations" kinds={datasetKinds('rlhf')} datasets={all} value={form.datasetId} onChange={(v) => set({ datasetId: v })} />
                <DatasetSelect id="nj-ds-rm" label="2 · Preference pairs" kinds={datasetKinds('rlhf', 'rm')} datasets={all} value={form.rmDatasetId} onChange={(v) => set({ rmDatasetId: v })} />
                <DatasetSelect id="nj-ds-rl" label="3 · RL prompts" kinds={datasetKinds('rlhf', 'rl')} datasets={all} value={form.rlDatasetId} onChange={(v) => set({ rlDatasetId: v })} />
              </>
            ) : (
              <div className="md:col-span-3">
                <DatasetSelect id="nj-ds" label={evaluating ? 'Eval set' : 'Dataset'} kinds={datasetKinds(form.algorithm)} datasets={all} value={form.datasetId} onChange={(v) => set({ datasetId: v })} />
              </div>
            )}
          </section>

          {evaluating && (
            <section className="card" aria-label="models">
              {library.isLoading ? (
                <Loading what="the library" />
              ) : library.isError ? (
                <ErrorState error={library.error} what="the library" />
              ) : (
                <EvalModelPicker
                  id="nj-models"
                  value={form.evalModels}
                  onChange={(evalModels) => set({ evalModels })}
                  models={libraryModels}
                  suggestions={form.backend === 'local' ? (models.data ?? []) : []}
                  baseline={form.baseModel.trim()}
                  max={maxEvalModels()}
                  error={modelsProblem}
                />
              )}
            </section>
          )}

          <section className="card">
            <h2 className="mb-3 text-sm font-medium text-neutral-200">
              {training ? (
                <>Hyperparameters <span className="text-xs text-neutral-500">— empty fields take the server's proposal for this data (in grey)</span></>
              ) : (
                <>Settings <span className="text-xs text-neutral-500">— empty fields take their default (in grey)</span></>
              )}
            </h2>
            <div className="grid gap-4 sm:grid-cols-2 xl:grid-cols-3">
              {evaluating && (
                <ScorerFields
                  id="nj-scorer"
                  types={scorerTypes()}
                  type={form.scorer}
                  pattern={form.scorerPattern}
                  fn={form.scorerFunction}
                  rewardModel={form.scorerRewardModel}
                  judgeModel={form.scorerJudgeModel}
                  judgeUrl={form.scorerJudgeUrl}
                  onChange={set}
                />
              )}
              {PARAMS[form.algorithm].map((p) => (
                <ParamField
                  key={p.key}
                  id={`nj-${p.key}`}
                  spec={p}
                  schema={configSchema(form.algorithm)}
                  value={form.params[p.key] ?? ''}
                  error={fieldError(p.key)}
                  proposed={proposed(proposal.data, null, p.key)}
                  onChange={(v) => set({ params: { ...form.params, [p.key]: v } })}
                />
              ))}
            </div>
            {form.algorithm === 'rlhf' &&
              RLHF_STAGES.map((s) => (
                <div key={s} className="mt-5">
                  <h3 className="label text-accent">{s === 'sl' ? 'Stage 1 · SL' : s === 'rm' ? 'Stage 2 · reward model' : 'Stage 3 · RL'}</h3>
                  <div className="grid gap-4 sm:grid-cols-2 xl:grid-cols-4">
                    {RLHF_STAGE_PARAMS[s].map((p) => (
                      <ParamField
                        key={p.key}
                        id={`nj-${s}-${p.key}`}
                        spec={p}
                        schema={configSchema('rlhf', s)}
                        value={form.stageParams[`${s}.${p.key}`] ?? ''}
                        error={fieldError(`${s}.${p.key}`)}
                        proposed={proposed(proposal.data, s, p.key)}
                        onChange={(v) => set({ stageParams: { ...form.stageParams, [`${s}.${p.key}`]: v } })}
                      />
                    ))}
                  </div>
                </div>
              ))}
          </section>

          {!evaluating && (
            <section className="card" aria-label="processes">
              <div className="max-w-xs">
                <NumberField
                  id="nj-gpus"
                  label={training ? 'GPUs (data-parallel processes)' : 'GPUs (shared by the actors)'}
                  help={<>{gpus?.description} From {String(gpus?.schema.minimum)} to {String(gpus?.schema.maximum)}.</>}
                  value={form.gpus}
                  onChange={(v) => set({ gpus: v })}
                  error={gpusProblem}
                  placeholder={gpus ? `default: ${String(gpus.default)}` : undefined}
                />
              </div>
              <p className="mt-1 text-xs text-neutral-500">
                {training
                  ? "Processes that train the job data-parallel, one GPU each (sl, dpo and rl; the batch is shared out, the results are one process's)."
                  : 'GPUs the pool of actors is spread over, one actor a GPU (Workers sets how many actors).'}
              </p>
            </section>
          )}

          <section className="card" aria-label="recovery">
            <div className="max-w-xs">
              <NumberField
                id="nj-auto-resume"
                label="Auto-resume retries"
                help={<>{autoResume?.description} From {String(autoResume?.schema.minimum)} to {String(autoResume?.schema.maximum)}.</>}
                value={form.autoResume}
                onChange={(v) => set({ autoResume: v })}
                error={autoResumeProblem}
                placeholder={autoResume ? `default: ${String(autoResume.default)}` : undefined}
              />
            </div>
            <p className="mt-1 text-xs text-neutral-500">
              {training
                ? 'Times the job resumes from its last checkpoint by itself when its worker or node is lost.'
                : evaluating
                  ? 'Times the job resumes by itself when its worker or node is lost; the models already answered are not asked again.'
                  : 'Times the job resumes by itself when its worker or node is lost; it answers only the inputs not answered yet.'}
            </p>
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
              Any key of the algorithm's config, e.g. <code>{training ? '{"warmup_steps": 5, "grad_clip_norm": 1.0, "seed": 1}' : evaluating ? '{"nll": false, "resamples": 2000, "seed": 1}' : '{"pool": "local", "max_retries": 3, "seed": 1}'}</code>
              {form.algorithm === 'rl' && <> or <code>{'{"reward": {"type": "regex", "pattern": "^\\\\d+$"}}'}</code></>}.
              Paths are not accepted: datasets are named by id.
            </p>
          </section>
        </div>

        <aside className="flex flex-col gap-4 lg:sticky lg:top-0 lg:self-start">
          {localProblems.length > 0 && (
            <section role="alert" className="card border-bad/60">
              <h2 className="font-semibold text-bad">Fix these first</h2>
              <ul className="mt-2 list-disc space-y-1 pl-5 text-sm text-neutral-200">
                {localProblems.map((p) => <li key={p} className="font-mono text-xs">{p}</li>)}
              </ul>
            </section>
          )}
          {serverProblems.length > 0 && (
            <section role="alert" className="card border-bad/60">
              <h2 className="font-semibold text-bad">The server refused this job</h2>
              <ul className="mt-2 list-disc space-y-1 pl-5 text-sm text-neutral-200">
                {serverProblems.map((p) => <li key={p} className="font-mono text-xs">{p}</li>)}
              </ul>
            </section>
          )}
          {create.isError && !serverProblems.length && (
            <section role="alert" className="card border-bad/60 text-sm text-bad">{create.error.message}</section>
          )}
          {proposes ? (
            <ProposalCard proposal={proposal.data} loading={proposal.isFetching} problems={proposal.isError ? proposalProblems.length ? proposalProblems : [proposal.error.message] : []} />
          ) : evaluating ? (
            <EvalCard baseline={form.baseModel.trim()} models={form.evalModels} names={modelNames} scorer={form.scorer} rows={evalRows(form, all.find((d) => d.id === form.datasetId)?.num_rows ?? null)} />
          ) : (
            <BatchCard form={form} rows={all.find((d) => d.id === form.datasetId)?.num_rows ?? null} />
          )}
          <section className="card">
            <h2 className="label">Request</h2>
            <pre data-testid="request-preview" className="max-h-96 overflow-auto rounded-xl bg-ink-950 p-3 font-mono text-xs text-neutral-300">
              {preview.body ? JSON.stringify(preview.body, null, 2) : preview.problems.join('\n')}
            </pre>
            <button type="submit" className="btn-cta mt-4 w-full justify-center" disabled={!canSubmit}>
              {create.isPending ? 'Validating…' : 'Queue the job'}
            </button>
            <p className="mt-2 text-xs text-neutral-500">
              Sent as shown: keys left out take {training ? "the server's proposal" : 'their defaults'}. The server validates everything against the dataset before
              queueing; nothing is kept if it refuses.
            </p>
          </section>
        </aside>
      </form>
    </div>
  )
}

/** The prompts an eval job answers: the eval set's rows, or the first max_examples of them. */
function evalRows(form: FormState, rows: number | null): number | null {
  const most = Number(form.params.max_examples?.trim() || NaN)
  return rows !== null && Number.isInteger(most) && most > 0 ? Math.min(rows, most) : rows
}

/** What a batch job will do, from the form's settings or their defaults (nothing is proposed). */
function BatchCard({ form, rows }: { form: FormState; rows: number | null }) {
  const schema = configSchema('batch')
  const value = (key: string) => form.params[key]?.trim() || String(configField(schema, key)?.default ?? '?')
  return (
    <section className="card flex flex-col gap-2 text-sm text-neutral-300" aria-label="batch plan">
      <h2 className="label">What it does</h2>
      <p>
        {rows === null ? 'Every row of the dataset' : <>Each of the dataset's <b>{rows} rows</b></>} is answered <b>{value('samples')} times</b> by
        a pool of <b>{value('workers')} actors</b>, {value('shard_size')} rows at a time (task <code className="text-accent">{value('task')}</code>).
      </p>
      <p className="text-xs text-neutral-400">
        An output's confidence is the share of its samples that agree; below {value('confidence_threshold')} it is flagged and not applied. Nothing is
        trained and no model is made: the results are on the job's page, and as a JSONL file.
      </p>
    </section>
  )
}

/** What an rm job does; its empty settings are proposed when it is queued, not previewed. */
/** The server's proposal for this data: the steps it comes to, and what to watch out for. */
function ProposalCard({ proposal, loading, problems }: { proposal: JobProposal | undefined; loading: boolean; problems: string[] }) {
  if (problems.length) {
    return (
      <section className="card border-warn/50">
        <h2 className="label">Proposal</h2>
        <ul className="mt-1 space-y-1 text-xs text-warn">{problems.map((p) => <li key={p}>{p}</li>)}</ul>
      </section>
    )
  }
  if (!proposal) {
    return (
      <section className="card text-xs text-neutral-500">
        <h2 className="label">Proposal</h2>
        {loading ? 'Asking the server…' : 'Choose the base model and the data: the server then proposes the settings you leave empty.'}
      </section>
    )
  }
  return (
    <section className="card flex flex-col gap-2" aria-label="proposal">
      <h2 className="label">Proposal {loading && <span className="normal-case text-neutral-500">· updating…</span>}</h2>
      <p className="text-sm text-neutral-200">
        <b>{proposal.total_steps} steps</b>
        {proposal.stages.length > 1 && <> ({proposal.stages.map((s) => `${s.stage} ${s.steps}`).join(', ')})</>} · {proposal.train_rows} training rows
      </p>
      {proposal.warnings.map((w) => <Warning key={w}>{w}</Warning>)}
      <ul className="text-xs text-neutral-400">{proposal.stages.flatMap((s) => s.why).map((w) => <li key={w}>• {w}</li>)}</ul>
    </section>
  )
}
