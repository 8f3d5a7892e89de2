// /training/wizard: a first training job in five steps — goal → data → configuration (the
// server's proposal for this data, editable; each edit is checked as typed and re-proposed) →
// review (the request exactly as it is sent, steps and time) → launch (confirmation, then the
// live deploy steps and the verdict). `?from=mdl_…` continues from a library model.
import { useMemo, useState } from 'react'
import { Link, useSearchParams } from 'react-router-dom'
import { errorMessage, type Schemas } from '../../api/client'
import { ErrorState, Loading } from '../../components/ui/States'
import { AlgorithmInfoButton } from '../../components/Training/AlgorithmInfo'
import { configField, datasetKinds, stageSchema } from '../../api/jobConfig'
import { ALGORITHM_BY_ID, TRAINING_ALGORITHMS, WIZARD_PARAMS, type TrainingAlgorithm } from '../../components/Training/algorithms'
import { problemsAbout, type JobProposal, type ProblemsError, type ProposalRequest, type Stage } from '../../components/Training/contract'
import { DeploySteps } from '../../components/Training/DeploySteps'
import { NumberField } from '../../components/ui/fields'
import { BaseModelField, DatasetSelect } from '../../components/Training/fields'
import { useBaseModels, useCreateJob, useDatasets, useDebounced, useProposal, type CreateJobError } from '../../components/Training/queries'
import { Modal } from '../../components/ui/Modal'
import { usePaces } from '../../components/Training/usePace'
import { batchKey, batchLimit, checkNumber, parseNumber, ruleOf } from '../../components/Training/validate'
import { defaultJobName, estimateTime, formatDuration } from '../../components/Training/wizardLogic'
import { useUiStore } from '../../state/ui'

const STEP_TITLES = ['Goal', 'Data', 'Configuration', 'Review', 'Launch']
const STAGE_TITLE: Record<Stage, string> = { sl: 'Supervised (SL)', dpo: 'DPO', rm: 'Reward model (judge)', rl: 'Reinforcement (RL)' }

const fieldsOf = (stage: Stage) => WIZARD_PARAMS[stage === 'rl' ? 'rl' : 'supervised']

function Stepper({ step }: { step: number }) {
  return (
    <ol className="flex flex-wrap items-center gap-2" aria-label="Wizard progress">
      {STEP_TITLES.map((t, i) => (
        <li key={t} className="flex items-center gap-2" aria-current={i === step ? 'step' : undefined}>
          <span className={`flex h-7 w-7 items-center justify-center rounded-full border text-xs ${i < step ? 'border-ok bg-ok/10 text-ok' : i === step ? 'border-accent bg-accent/15 text-accent shadow-[0_0_12px_rgba(14,165,233,0.4)]' : 'border-ink-600 text-neutral-500'}`}>
            {i < step ? '✓' : i + 1}
          </span>
          <span className={`text-sm ${i === step ? 'text-neutral-100' : 'text-neutral-500'}`}>{t}</span>
          {i < STEP_TITLES.length - 1 && <span className="mx-1 h-px w-6 bg-ink-600" />}
        </li>
      ))}
    </ol>
  )
}

function GoalStep({ value, onPick, choices }: { value: TrainingAlgorithm | null; onPick: (a: TrainingAlgorithm) => void; choices: readonly TrainingAlgorithm[] }) {
  return (
    <div className="grid gap-3 md:grid-cols-2">
      {choices.map((id) => [id, ALGORITHM_BY_ID[id]] as const).map(([id, a]) => (
        <button
          key={id}
          type="button"
          onClick={() => onPick(id)}
          aria-pressed={value === id}
          className={`card text-left transition hover:border-accent/70 ${value === id ? 'border-accent bg-accent/5 shadow-[0_0_24px_rgba(14,165,233,0.15)]' : ''}`}
        >
          <div className="flex items-baseline justify-between gap-2">
            <h3 className="font-semibold text-neutral-100">{a.goal}</h3>
            <span className="rounded-md bg-ink-700 px-1.5 py-0.5 font-mono text-xs text-accent">{a.short}</span>
          </div>
          <p className="mt-2 text-sm text-neutral-300">{a.what}</p>
          <p className="mt-2 text-xs text-neutral-500"><b className="text-neutral-400">When:</b> {a.when}</p>
          <code className="mt-3 block overflow-x-auto rounded-lg bg-ink-950 p-2 font-mono text-[11px] text-neutral-400">{a.example}</code>
        </button>
      ))}
    </div>
  )
}

type Ids = { main: string; rm: string; rl: string }
type Json = Record<string, unknown>

/** Where a stage's settings are in a job config: config.<stage> for rlhf, config otherwise. */
function sectionOf(config: Json | undefined, rlhf: boolean, stage: Stage): Json {
  if (!config) return {}
  return rlhf ? ((config[stage] as Json | undefined) ?? {}) : config
}

const shown = (v: unknown) => (v === undefined || v === null ? '' : String(v))

/** Each edited field's problem, keyed "<stage>.<key>": the schema's rules and the batch rule. */
function editErrors(algorithm: TrainingAlgorithm | null, edits: Readonly<Record<string, string>>, rows: Partial<Record<Stage, number>>) {
  const errors: Record<string, string> = {}
  for (const [k, raw] of Object.entries(edits)) {
    const [stage, key] = k.split('.') as [Stage, string]
    const limit = key === batchKey(stage) ? batchLimit(rows[stage]) : undefined
    const rule = algorithm ? ruleOf(stageSchema(algorithm, stage), key) : null
    const error = checkNumber(raw, rule, { required: true, limit })
    if (error) errors[k] = error
  }
  return errors
}

/** The proposal request: the data, and the edits that can be sent (refused ones wait for a fix). */
function proposalRequest(algorithm: TrainingAlgorithm | null, baseModel: string, ids: Ids, edits: Readonly<Record<string, string>>, errors: Readonly<Record<string, string>>): ProposalRequest | null {
  if (!algorithm || !baseModel.trim() || !ids.main) return null
  const rlhf = algorithm === 'rlhf'
  if (rlhf && !(ids.rm && ids.rl)) return null
  const config: Json = rlhf ? { sl: {}, rm: { dataset_id: ids.rm }, rl: { dataset_id: ids.rl } } : {}
  for (const [k, raw] of Object.entries(edits)) {
    const value = parseNumber(raw)
    if (errors[k] || value === null) continue
    const [stage, key] = k.split('.') as [Stage, string]
    ;(rlhf ? (config[stage] as Json) : config)[key] = value
  }
  return { algorithm, backend: 'local', base_model: baseModel.trim(), dataset_id: ids.main, config } as ProposalRequest
}

export function WizardPage() {
  const [search] = useSearchParams()
  const from = search.get('from')
  const datasets = useDatasets()
  const models = useBaseModels()
  const create = useCreateJob()
  const setWizardSeen = useUiStore((s) => s.setWizardSeen)
  const [step, setStep] = useState(0)
  const [algorithm, setAlgorithm] = useState<TrainingAlgorithm | null>(null)
  const [ids, setIds] = useState<Ids>({ main: '', rm: '', rl: '' })
  const [baseModel, setBaseModel] = useState(from ?? 'thinker/tiny')
  const [name, setName] = useState('')
  // The default name's time: set when the method or the data is chosen, not at each render.
  const [stamp, setStamp] = useState(() => new Date())
  const [edits, setEdits] = useState<Record<string, string>>({})
  const [confirming, setConfirming] = useState(false)
  const [jobId, setJobId] = useState<string | null>(null)

  const all = useMemo(() => datasets.data?.data ?? [], [datasets.data])
  const byId = (id: string) => all.find((d) => d.id === id)
  const rlhf = algorithm === 'rlhf'

  // The proposal without edits gives each stage's training rows, which bound the batch
  // fields; the one with the valid edits is what is shown and sent.
  const base = useProposal(useDebounced(proposalRequest(algorithm, baseModel, ids, {}, {})))
  const rows = Object.fromEntries((base.data?.stages ?? []).map((s) => [s.stage, s.train_rows])) as Partial<Record<Stage, number>>
  const errors = editErrors(algorithm, edits, rows)
  const request = proposalRequest(algorithm, baseModel, ids, edits, errors)
  const asked = useDebounced(request)
  const proposal = useProposal(asked)
  const fresh = JSON.stringify(asked) === JSON.stringify(request) && proposal.isSuccess && !proposal.isPlaceholderData
  const current: JobProposal | undefined = proposal.data ?? base.data

  const proposalProblems = proposal.isError ? ((proposal.error as ProblemsError).problems ?? []) : []
  const createProblems = create.isError ? ((create.error as CreateJobError).problems ?? []) : []
  const baseModelError =
    (!baseModel.trim() ? 'Enter a base model.' : null) ??
    problemsAbout(createProblems, 'base_model')[0] ??
    problemsAbout(proposalProblems, 'base_model')[0] ??
    problemsAbout(base.isError ? ((base.error as ProblemsError).problems ?? []) : [], 'base_model')[0] ??
    null
  const fieldPath = (stage: Stage, key: string) => (rlhf ? `config.${stage}.${key}` : `config.${key}`)
  const fieldError = (stage: Stage, key: string) =>
    errors[`${stage}.${key}`] ?? problemsAbout([...proposalProblems, ...createProblems], fieldPath(stage, key))[0] ?? null
  // The problems no field shows: a missing dataset, a server that cannot be reached.
  const shownPaths = (proposal.data ?? base.data)?.stages.flatMap((s) => fieldsOf(s.stage).map((f) => fieldPath(s.stage, f.key))) ?? []
  const generalProblems = !proposal.isError
    ? []
    : proposalProblems.length
      ? proposalProblems.filter((p) => !p.startsWith('base_model:') && !shownPaths.some((f) => p.startsWith(`${f}:`)))
      : [errorMessage(proposal.error)]

  const defaultName = algorithm && byId(ids.main) ? defaultJobName(byId(ids.main)?.name ?? ids.main, algorithm, stamp) : ''
  const body: Schemas['JobCreate'] | null =
    algorithm && fresh && proposal.data
      ? ({ algorithm, backend: 'local', base_model: baseModel.trim(), dataset_id: ids.main, name: name.trim() || defaultName, priority: 0, config: proposal.data.config } as Schemas['JobCreate'])
      : null

  const paces = usePaces(algorithm ?? 'sl', baseModel, 'local', step >= 3 && algorithm !== null)
  const estimate = body && proposal.data && paces.data ? estimateTime(proposal.data.stages, paces.data) : null

  if (datasets.isLoading) return <Loading what="datasets" />
  if (datasets.isError) return <ErrorState error={datasets.error} what="datasets" />

  const info = algorithm ? ALGORITHM_BY_ID[algorithm] : null
  const dataReady = rlhf ? !!(ids.main && ids.rm && ids.rl) : !!ids.main
  const configReady = fresh && !baseModelError && Object.keys(errors).length === 0
  const canNext = step === 0 ? !!algorithm : step === 1 ? dataReady : step === 2 ? configReady : true
  const fromLabel = from ? (models.data?.find((m) => m.id === from)?.label ?? from) : null
  // A reward model alone is no better model to chat with: it is trained from the advanced form.
  const choices: TrainingAlgorithm[] = from ? ['sl', 'dpo', 'rl'] : TRAINING_ALGORITHMS.filter((a) => a !== 'rm')

  const launch = () => {
    if (!body) return
    setConfirming(false)
    create.mutate(body, { onSuccess: (job) => { setJobId(job.id); setWizardSeen(true); setStep(4) } })
  }

  return (
    <div className="mx-auto flex max-w-6xl flex-col gap-6">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <Link to="/training" className="text-xs text-neutral-500 hover:text-accent">← All jobs</Link>
          <h1 className="text-2xl font-semibold text-neutral-100">{fromLabel ? `Train ${fromLabel} further` : 'Train your first model'}</h1>
          <p className="text-sm text-neutral-400">Five short steps. Nothing starts until you confirm. <Link to="/training/new" className="text-accent hover:underline">Skip the wizard</Link></p>
        </div>
        <AlgorithmInfoButton highlight={algorithm ?? undefined} />
      </header>
      <Stepper step={step} />

      <section className="flex flex-col gap-4">
        {step === 0 && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">What do you want the model to learn?</h2>
            {fromLabel && (
              <p className="card border-accent/50 text-sm text-neutral-300">
                Continuing from <b className="font-mono text-accent">{fromLabel}</b>: its adapter trains further on new data, with supervised
                examples, preference pairs or a reward. (RLHF trains its own first stage, so it starts from a base model.)
              </p>
            )}
            <GoalStep value={algorithm} choices={choices} onPick={(a) => { setAlgorithm(a); setIds({ main: '', rm: '', rl: '' }); setEdits({}); setStamp(new Date()) }} />
          </>
        )}

        {step === 1 && algorithm && info && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Which data should it learn from?</h2>
            <p className="text-sm text-neutral-400">
              {info.short} trains on {rlhf ? 'three datasets: demonstrations, preference pairs and prompts' : `${datasetKinds(algorithm).join(' or ')} datasets`}. One row looks like:
              <code className="ml-2 rounded bg-ink-950 px-2 py-0.5 font-mono text-xs text-neutral-300">{info.example}</code>
            </p>
            <div className="card grid gap-4 md:grid-cols-3">
              {rlhf ? (
                <>
                  <DatasetSelect id="wz-ds" label="1 · Demonstrations" kinds={datasetKinds('rlhf')} datasets={all} value={ids.main} onChange={(v) => { setIds({ ...ids, main: v }); setEdits({}); setStamp(new Date()) }} />
                  <DatasetSelect id="wz-ds-rm" label="2 · Preference pairs" kinds={datasetKinds('rlhf', 'rm')} datasets={all} value={ids.rm} onChange={(v) => { setIds({ ...ids, rm: v }); setEdits({}) }} />
                  <DatasetSelect id="wz-ds-rl" label="3 · Prompts" kinds={datasetKinds('rlhf', 'rl')} datasets={all} value={ids.rl} onChange={(v) => { setIds({ ...ids, rl: v }); setEdits({}) }} />
                </>
              ) : (
                <div className="md:col-span-3">
                  <DatasetSelect id="wz-ds" label="Dataset" kinds={datasetKinds(algorithm)} datasets={all} value={ids.main} onChange={(v) => { setIds({ ...ids, main: v }); setEdits({}); setStamp(new Date()) }} />
                </div>
              )}
            </div>
            <p className="text-sm text-neutral-500">
              Your own data? <Link to="/datasets" className="text-accent hover:underline">Upload it in Datasets</Link> — the validator checks every line and shows what training will see — then come back.
            </p>
          </>
        )}

        {step === 2 && algorithm && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Configuration, proposed by the server for your data</h2>
            <div className="card grid gap-4 md:grid-cols-2">
              <BaseModelField id="wz-model" value={baseModel} onChange={(v) => { setBaseModel(v); create.reset() }} options={models.data ?? []} error={baseModelError} />
              <div>
                <label htmlFor="wz-name" className="label">Job name</label>
                <input id="wz-name" className="input" placeholder={defaultName} value={name} onChange={(e) => setName(e.target.value)} />
                <p className="mt-1 text-xs text-neutral-500">Empty: {defaultName || 'dataset, method and time'}.</p>
              </div>
            </div>
            {generalProblems.length > 0 && (
              <div role="alert" className="card border-bad/60">
                <h3 className="font-semibold text-bad">The server cannot propose a configuration</h3>
                <ul className="mt-2 list-disc pl-5 font-mono text-xs text-neutral-200">
                  {generalProblems.map((p) => <li key={p}>{p}</li>)}
                </ul>
              </div>
            )}
            {!current && !proposal.isError && !base.isError && <Loading what="the server's proposal" />}
            {current && current.warnings.length > 0 && (
              <section role="alert" aria-label="warnings" className="card border-warn/60 bg-warn/5">
                <h3 className="flex items-center gap-2 font-semibold text-warn"><span aria-hidden>⚠</span> Before you train</h3>
                <ul className="mt-2 space-y-1 text-sm text-neutral-200">{current.warnings.map((w) => <li key={w}>{w}</li>)}</ul>
              </section>
            )}
            {current?.stages.map((s, i) => {
              const section = sectionOf(current.config, rlhf, s.stage)
              return (
                <div key={s.stage} className="card" data-testid={`stage-${s.stage}`}>
                  <h3 className="font-medium text-neutral-100">
                    {STAGE_TITLE[s.stage]} <span className="text-sm font-normal text-neutral-500">· <span data-testid={`steps-${s.stage}`}>{s.steps} steps</span> · {s.train_rows} of {s.rows} rows to train on</span>
                  </h3>
                  <ul className="mt-1 text-xs text-neutral-400">{s.why.map((w) => <li key={w}>• {w}</li>)}</ul>
                  <div className="mt-3 grid gap-3 sm:grid-cols-3 lg:grid-cols-6">
                    {fieldsOf(s.stage).map((f) => {
                      const key = `${s.stage}.${f.key}`
                      const proposed = shown(section[f.key])
                      // A setting the proposal leaves out (epochs when steps decide) may stay empty.
                      const edit = (v: string) => {
                        const { [key]: _old, ...rest } = edits
                        setEdits(v.trim() === '' && proposed === '' ? rest : { ...rest, [key]: v })
                        create.reset() // a refusal was of the settings before this edit
                      }
                      return (
                        <NumberField
                          key={f.key}
                          id={`wz-${i}-${f.key}`}
                          label={f.label}
                          help={configField(stageSchema(algorithm, s.stage), f.key)?.description}
                          value={edits[key] ?? proposed}
                          placeholder={f.key === 'max_steps' ? `${s.steps}, from the epochs` : f.key === 'num_epochs' ? 'steps decide' : undefined}
                          error={fieldError(s.stage, f.key)}
                          onChange={edit}
                        />
                      )
                    })}
                  </div>
                </div>
              )
            })}
            {current && (
              <p className="flex flex-wrap items-center gap-3 text-xs text-neutral-500">
                <span data-testid="proposal-state">{fresh ? `${proposal.data?.total_steps} steps in all.` : 'Updating the proposal…'}</span>
                {Object.keys(edits).length > 0 && <button type="button" className="text-accent hover:underline" onClick={() => setEdits({})}>Back to the proposal</button>}
              </p>
            )}
          </>
        )}

        {step === 3 && info && !body && <Loading what="the configuration" />}
        {step === 3 && info && body && proposal.data && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Review</h2>
            {proposal.data.warnings.length > 0 && (
              <section role="alert" aria-label="warnings" className="card border-warn/60 bg-warn/5">
                <ul className="space-y-1 text-sm text-warn">{proposal.data.warnings.map((w) => <li key={w}>⚠ {w}</li>)}</ul>
              </section>
            )}
            <div className="grid gap-4 md:grid-cols-3">
              <div className="card md:col-span-2">
                <dl className="grid grid-cols-[auto_1fr] gap-x-6 gap-y-2 text-sm">
                  <dt className="text-neutral-500">Method</dt><dd>{info.short} — {info.name}</dd>
                  <dt className="text-neutral-500">Base model</dt>
                  <dd className="font-mono">
                    {body.base_model} (local)
                    {proposal.data.parent_model_id && <span className="font-sans text-neutral-400"> — continues this library model, whose base is {proposal.data.base_model}</span>}
                  </dd>
                  <dt className="text-neutral-500">Data</dt>
                  <dd>{[ids.main, ids.rm, ids.rl].filter(Boolean).map((id) => `${byId(id)?.name} (${byId(id)?.num_rows ?? '?'} rows)`).join(', ')}</dd>
                  <dt className="text-neutral-500">Name</dt><dd>{body.name}</dd>
                  {proposal.data.stages.map((s) => (
                    <div key={s.stage} className="contents">
                      <dt className="text-neutral-500">{STAGE_TITLE[s.stage]}</dt>
                      <dd className="font-mono text-xs text-neutral-300">
                        {Object.entries(sectionOf(body.config, rlhf, s.stage)).filter(([, v]) => typeof v !== 'object' || v === null).map(([k, v]) => `${k}=${v}`).join('  ')}
                      </dd>
                    </div>
                  ))}
                </dl>
                <details className="mt-4">
                  <summary className="cursor-pointer text-xs text-neutral-500 hover:text-accent">The request, exactly as it is sent</summary>
                  <pre data-testid="review-request" className="mt-2 max-h-80 overflow-auto rounded-xl bg-ink-950 p-3 font-mono text-xs text-neutral-300">{JSON.stringify(body, null, 2)}</pre>
                </details>
              </div>
              <div className="card flex flex-col gap-2 border-accent/40">
                <span className="label">Estimated</span>
                <span className="text-3xl font-semibold text-neutral-100" data-testid="estimate-steps">{proposal.data.total_steps} steps</span>
                <span className="text-xl text-accent" data-testid="estimate-time">
                  {paces.isLoading ? 'estimating…' : estimate?.seconds !== null && estimate ? `≈ ${formatDuration(estimate.seconds)}` : 'time unknown until the first steps'}
                </span>
                {estimate && <p className="text-xs text-neutral-500">Basis: {estimate.basis}. Starting the worker adds a few seconds; other jobs on the machine slow it down.</p>}
              </div>
            </div>
            {create.isError && (
              <div role="alert" className="card border-bad/60">
                <h3 className="font-semibold text-bad">The server refused the job</h3>
                <ul className="mt-2 list-disc pl-5 font-mono text-xs text-neutral-200">
                  {(createProblems.length ? createProblems : [errorMessage(create.error)]).map((p) => <li key={p}>{p}</li>)}
                </ul>
                <button type="button" className="btn-ghost mt-3" onClick={() => setStep(2)}>← Back to the configuration to fix it</button>
              </div>
            )}
          </>
        )}

        {step === 4 && jobId && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Launched — follow it here</h2>
            <DeploySteps jobId={jobId} />
          </>
        )}
      </section>

      {step < 4 && (
        <footer className="flex items-center justify-between border-t border-ink-700 pt-4">
          <button type="button" className="btn-ghost" disabled={step === 0} onClick={() => setStep(step - 1)}>← Back</button>
          {step < 3 ? (
            <button type="button" className="btn-cta" disabled={!canNext} onClick={() => setStep(step + 1)}>
              Next: {STEP_TITLES[step + 1]} →
            </button>
          ) : (
            <button type="button" className="btn-cta" disabled={create.isPending || !body} onClick={() => setConfirming(true)}>
              {create.isPending ? 'Launching…' : 'Launch training'}
            </button>
          )}
        </footer>
      )}

      {confirming && body && proposal.data && info && (
        <Modal title="Start training?" onClose={() => setConfirming(false)}>
          <p className="text-sm text-neutral-300">
            You're about to train <b>{body.base_model}</b> with <b>{info.short}</b> on{' '}
            <b>{byId(ids.main)?.name}</b> for <b>{proposal.data.total_steps} steps</b>
            {estimate?.seconds != null ? <> (about {formatDuration(estimate.seconds)})</> : null}. It runs on this machine
            in the background; you can pause or cancel it from its page at any time.
          </p>
          <div className="mt-5 flex justify-end gap-2">
            <button type="button" className="btn-ghost" onClick={() => setConfirming(false)}>Not yet</button>
            <button type="button" className="btn-cta" onClick={launch}>Yes, start training</button>
          </div>
        </Modal>
      )}
    </div>
  )
}
