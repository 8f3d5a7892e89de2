// /training/wizard: a first training job in five steps — goal → data → configuration (defaults
// from the dataset's size) → review (steps and time, with the basis of the estimate) → launch
// (confirmation, then the live deploy steps and what happens next).
import { useMemo, useState } from 'react'
import { Link } from 'react-router-dom'
import { errorMessage } from '../../api/client'
import { ErrorState, Loading } from '../../components/common/States'
import { AlgorithmInfoButton } from '../../components/Training/AlgorithmInfo'
import { ALGORITHMS, ALGORITHM_BY_ID, KINDS, RLHF_KINDS, builtinModels, type Algorithm } from '../../components/Training/algorithms'
import { DeploySteps } from '../../components/Training/DeploySteps'
import { DatasetSelect } from '../../components/Training/fields'
import { useBaseModels, useCreateJob, useDatasets, type CreateJobError } from '../../components/Training/queries'
import { InfoTip, Modal } from '../../components/Training/ui'
import { usePaces } from '../../components/Training/usePace'
import { applyOverrides, estimateTime, formatDuration, planOf, suggestPlan, type StagePlan } from '../../components/Training/wizardLogic'
import { useUiStore } from '../../state/ui'

const STEP_TITLES = ['Goal', 'Data', 'Configuration', 'Review', 'Launch']
const STAGE_TITLE: Record<StagePlan['stage'], string> = { sl: 'Supervised (SL)', dpo: 'DPO', rm: 'Reward model (judge)', rl: 'Reinforcement (RL)' }

const FIELDS: Record<'supervised' | 'rl', { key: string; label: string; help: string }[]> = {
  supervised: [
    { key: 'batch_size', label: 'Batch size', help: 'Examples (or pairs) per step. Larger = smoother but fewer steps.' },
    { key: 'num_epochs', label: 'Epochs', help: 'Passes over the data. Small sets: 2–3; watch the held-out loss for overfitting.' },
    { key: 'learning_rate', label: 'Learning rate', help: 'Step size. If the loss swings or climbs, halve it; if it barely moves, double it.' },
    { key: 'eval_every', label: 'Evaluate every', help: 'Steps between held-out evaluations (about 10 per run).' },
    { key: 'save_every', label: 'Save every', help: 'Steps between checkpoints; each becomes a model you can try.' },
  ],
  rl: [
    { key: 'group_size', label: 'Group size', help: 'Completions per prompt; the advantage is a completion\'s reward minus its group\'s mean.' },
    { key: 'groups_per_batch', label: 'Prompts per step', help: 'Groups per step; each step samples group size × this.' },
    { key: 'max_steps', label: 'Steps', help: 'RL steps; sampling makes each one costly.' },
    { key: 'learning_rate', label: 'Learning rate', help: 'Real models: 1e-5 to 4e-5. Too high collapses the policy.' },
    { key: 'eval_every', label: 'Evaluate every', help: 'Steps between held-out reward evaluations.' },
    { key: 'save_every', label: 'Save every', help: 'Steps between checkpoints.' },
  ],
}

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

function GoalStep({ value, onPick }: { value: Algorithm | null; onPick: (a: Algorithm) => void }) {
  return (
    <div className="grid gap-3 md:grid-cols-2">
      {ALGORITHMS.map((a) => (
        <button
          key={a.id}
          type="button"
          onClick={() => onPick(a.id)}
          aria-pressed={value === a.id}
          className={`card text-left transition hover:border-accent/70 ${value === a.id ? 'border-accent bg-accent/5 shadow-[0_0_24px_rgba(14,165,233,0.15)]' : ''}`}
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

export function WizardPage() {
  const datasets = useDatasets()
  const models = useBaseModels()
  const create = useCreateJob()
  const setWizardSeen = useUiStore((s) => s.setWizardSeen)
  const [step, setStep] = useState(0)
  const [algorithm, setAlgorithm] = useState<Algorithm | null>(null)
  const [ids, setIds] = useState({ main: '', rm: '', rl: '' })
  const [baseModel, setBaseModel] = useState('thinker/tiny')
  const [name, setName] = useState('')
  const [edits, setEdits] = useState<Record<string, string>>({})
  const [confirming, setConfirming] = useState(false)
  const [jobId, setJobId] = useState<string | null>(null)

  const all = useMemo(() => datasets.data?.data ?? [], [datasets.data])
  const byId = (id: string) => all.find((d) => d.id === id)
  const rows = (id: string) => byId(id)?.num_rows ?? 0

  const plan = useMemo(() => {
    if (!algorithm) return null
    const base = suggestPlan(algorithm, { main: rows(ids.main), pairs: rows(ids.rm), prompts: rows(ids.rl) }, baseModel)
    const stages = base.stages.map((s, i) => {
      const mine: Record<string, number> = {}
      for (const [k, v] of Object.entries(edits)) {
        const [idx, key] = k.split(':')
        if (Number(idx) === i && v.trim() !== '' && Number.isFinite(Number(v)) && Number(v) > 0) mine[key] = Number(v)
      }
      return applyOverrides(s, mine)
    })
    return planOf(stages, algorithm === 'rlhf')
    // rows() reads `all`, which is in the deps.
  }, [algorithm, ids, baseModel, edits, all])

  const paces = usePaces(algorithm ?? 'sl', baseModel, 'local', step >= 3 && algorithm !== null)
  const estimate = plan && paces.data ? estimateTime(plan, paces.data) : null

  if (datasets.isLoading) return <Loading what="datasets" />
  if (datasets.isError) return <ErrorState error={datasets.error} what="datasets" />

  const info = algorithm ? ALGORITHM_BY_ID[algorithm] : null
  const dataReady = algorithm === 'rlhf' ? !!(ids.main && ids.rm && ids.rl) : !!ids.main
  const canNext = step === 0 ? !!algorithm : step === 1 ? dataReady : true
  const builtins = builtinModels(models.data ?? [])
  const defaultName = info && byId(ids.main) ? `${byId(ids.main)?.name}-${info.id}` : ''

  const launch = () => {
    if (!algorithm || !plan) return
    setConfirming(false)
    const config = algorithm === 'rlhf'
      ? { sl: plan.config.sl, rm: { ...(plan.config.rm as object), dataset_id: ids.rm }, rl: { ...(plan.config.rl as object), dataset_id: ids.rl } }
      : plan.config
    create.mutate(
      { algorithm, backend: 'local', base_model: baseModel, dataset_id: ids.main, name: name.trim() || defaultName, priority: 0, config },
      { onSuccess: (job) => { setJobId(job.id); setWizardSeen(true); setStep(4) } },
    )
  }

  return (
    <div className="mx-auto flex max-w-6xl flex-col gap-6">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <Link to="/training" className="text-xs text-neutral-500 hover:text-accent">← All jobs</Link>
          <h1 className="text-2xl font-semibold text-neutral-100">Train your first model</h1>
          <p className="text-sm text-neutral-400">Five short steps. Nothing starts until you confirm. <Link to="/training/new" className="text-accent hover:underline">Skip the wizard</Link></p>
        </div>
        <AlgorithmInfoButton highlight={algorithm ?? undefined} />
      </header>
      <Stepper step={step} />

      <section className="flex flex-col gap-4">
        {step === 0 && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">What do you want the model to learn?</h2>
            <GoalStep value={algorithm} onPick={(a) => { setAlgorithm(a); setIds({ main: '', rm: '', rl: '' }); setEdits({}) }} />
          </>
        )}

        {step === 1 && algorithm && info && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Which data should it learn from?</h2>
            <p className="text-sm text-neutral-400">
              {info.short} trains on {algorithm === 'rlhf' ? 'three datasets: demonstrations, preference pairs and prompts' : `${KINDS[algorithm].join(' or ')} datasets`}. One row looks like:
              <code className="ml-2 rounded bg-ink-950 px-2 py-0.5 font-mono text-xs text-neutral-300">{info.example}</code>
            </p>
            <div className="card grid gap-4 md:grid-cols-3">
              {algorithm === 'rlhf' ? (
                <>
                  <DatasetSelect id="wz-ds" label="1 · Demonstrations" kinds={RLHF_KINDS.sl} datasets={all} value={ids.main} onChange={(v) => setIds({ ...ids, main: v })} />
                  <DatasetSelect id="wz-ds-rm" label="2 · Preference pairs" kinds={RLHF_KINDS.rm} datasets={all} value={ids.rm} onChange={(v) => setIds({ ...ids, rm: v })} />
                  <DatasetSelect id="wz-ds-rl" label="3 · Prompts" kinds={RLHF_KINDS.rl} datasets={all} value={ids.rl} onChange={(v) => setIds({ ...ids, rl: v })} />
                </>
              ) : (
                <div className="md:col-span-3">
                  <DatasetSelect id="wz-ds" label="Dataset" kinds={KINDS[algorithm]} datasets={all} value={ids.main} onChange={(v) => { setIds({ ...ids, main: v }); setEdits({}) }} />
                </div>
              )}
            </div>
            <p className="text-sm text-neutral-500">
              Your own data? <Link to="/datasets" className="text-accent hover:underline">Upload it in Datasets</Link> — the validator checks every line and shows what training will see — then come back.
            </p>
          </>
        )}

        {step === 2 && plan && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Configuration, chosen from your data's size</h2>
            <div className="card grid gap-4 md:grid-cols-2">
              <div>
                <label htmlFor="wz-model" className="label">Base model</label>
                <select id="wz-model" className="input" value={baseModel} onChange={(e) => { setBaseModel(e.target.value); setEdits({}) }}>
                  {(builtins.length ? builtins : ['thinker/tiny']).map((m) => <option key={m}>{m}</option>)}
                </select>
                <p className="mt-1 text-xs text-neutral-500">thinker/tiny trains in seconds on a CPU — ideal for a first run. Tinker models: use the advanced form.</p>
              </div>
              <div>
                <label htmlFor="wz-name" className="label">Job name</label>
                <input id="wz-name" className="input" placeholder={defaultName} value={name} onChange={(e) => setName(e.target.value)} />
              </div>
            </div>
            {plan.stages.map((s, i) => (
              <div key={s.stage} className="card">
                <h3 className="font-medium text-neutral-100">{STAGE_TITLE[s.stage]} <span className="text-sm font-normal text-neutral-500">· {s.steps} steps</span></h3>
                <ul className="mt-1 text-xs text-neutral-400">{s.why.map((w) => <li key={w}>• {w}</li>)}</ul>
                <div className="mt-3 grid gap-3 sm:grid-cols-3 lg:grid-cols-6">
                  {FIELDS[s.stage === 'rl' ? 'rl' : 'supervised'].map((f) => (
                    <div key={f.key}>
                      <label htmlFor={`wz-${i}-${f.key}`} className="label flex items-center gap-1.5">{f.label} <InfoTip>{f.help}</InfoTip></label>
                      <input
                        id={`wz-${i}-${f.key}`}
                        className="input font-mono"
                        inputMode="decimal"
                        value={edits[`${i}:${f.key}`] ?? String(s.config[f.key] ?? '')}
                        onChange={(e) => setEdits({ ...edits, [`${i}:${f.key}`]: e.target.value })}
                      />
                    </div>
                  ))}
                </div>
              </div>
            ))}
          </>
        )}

        {step === 3 && plan && info && (
          <>
            <h2 className="text-lg font-medium text-neutral-100">Review</h2>
            <div className="grid gap-4 md:grid-cols-3">
              <div className="card md:col-span-2">
                <dl className="grid grid-cols-[auto_1fr] gap-x-6 gap-y-2 text-sm">
                  <dt className="text-neutral-500">Method</dt><dd>{info.short} — {info.name}</dd>
                  <dt className="text-neutral-500">Base model</dt><dd className="font-mono">{baseModel} (local)</dd>
                  <dt className="text-neutral-500">Data</dt>
                  <dd>{[ids.main, ids.rm, ids.rl].filter(Boolean).map((id) => `${byId(id)?.name} (${rows(id)} rows)`).join(', ')}</dd>
                  <dt className="text-neutral-500">Name</dt><dd>{name.trim() || defaultName}</dd>
                  {plan.stages.map((s) => (
                    <div key={s.stage} className="contents">
                      <dt className="text-neutral-500">{STAGE_TITLE[s.stage]}</dt>
                      <dd className="font-mono text-xs text-neutral-300">{Object.entries(s.config).map(([k, v]) => `${k}=${v}`).join('  ')}</dd>
                    </div>
                  ))}
                </dl>
              </div>
              <div className="card flex flex-col gap-2 border-accent/40">
                <span className="label">Estimated</span>
                <span className="text-3xl font-semibold text-neutral-100" data-testid="estimate-steps">{plan.totalSteps} steps</span>
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
                  {((create.error as CreateJobError).problems?.length ? (create.error as CreateJobError).problems : [errorMessage(create.error)]).map((p) => <li key={p}>{p}</li>)}
                </ul>
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
            <button type="button" className="btn-cta" disabled={create.isPending} onClick={() => setConfirming(true)}>
              {create.isPending ? 'Launching…' : 'Launch training'}
            </button>
          )}
        </footer>
      )}

      {confirming && plan && info && (
        <Modal title="Start training?" onClose={() => setConfirming(false)}>
          <p className="text-sm text-neutral-300">
            You're about to train <b>{baseModel}</b> with <b>{info.short}</b> on{' '}
            <b>{byId(ids.main)?.name}</b> for <b>{plan.totalSteps} steps</b>
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
