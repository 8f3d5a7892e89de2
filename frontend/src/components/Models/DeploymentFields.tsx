// A deployment's settings as form fields, each with a line of help: the name and the library
// model it serves (when creating), then the loop: log traffic, redaction, retention, the
// schedule (said in words as it is typed), the feedback a cycle needs, the learn job's steps,
// and the promotion gate's eval set (chat, prompt_completion or problems datasets).
import type { ReactNode } from 'react'
import { datasetKinds } from '../../api/jobConfig'
import { invalidProps } from '../ui/aria'
import { FieldError } from '../ui/fields'
import { Warning } from '../ui/Warning'
import { useDatasets } from '../Training/queries'
import { SCHEDULE_PRESETS, scheduleWords, type DeploymentForm, type FormProblems, type Redact } from './deployments'
import { useModels } from './queries'

interface Props {
  id: string
  form: DeploymentForm
  onChange: (patch: Partial<DeploymentForm>) => void
  problems: FormProblems
  /** The name and the model are set once, at creation. */
  creating: boolean
}

export function DeploymentFields({ id, form, onChange, problems, creating }: Props) {
  const models = useModels({}).data?.data ?? []
  const kinds = datasetKinds('eval')
  const evalSets = (useDatasets().data?.data ?? []).filter((d) => kinds.includes(d.kind))
  const words = scheduleWords(form.schedule)
  return (
    <div className="grid gap-4 md:grid-cols-2">
      {creating && (
        <>
          <Row id={`${id}-name`} label="Name" error={problems.name} help={<>What apps send as <code className="text-accent">"model"</code> to /v1/chat/completions.</>}>
            <input id={`${id}-name`} className="input font-mono" placeholder="e.g. assistant" spellCheck={false} value={form.name}
              onChange={(e) => onChange({ name: e.target.value })} {...invalidProps(`${id}-name`, problems.name)} />
          </Row>
          <Row id={`${id}-model`} label="Model" error={problems.modelId} help="The library model it serves; after this, only the promotion gate changes it.">
            <select id={`${id}-model`} className="input" value={form.modelId} onChange={(e) => onChange({ modelId: e.target.value })} {...invalidProps(`${id}-model`, problems.modelId)}>
              <option value="">choose a library model…</option>
              {models.map((m) => (
                <option key={m.id} value={m.id}>{m.name} · {m.base_model} · step {m.step}{m.lifecycle === 'archived' ? ' (archived)' : ''}</option>
              ))}
            </select>
          </Row>
        </>
      )}
      <Row id={`${id}-log`} label="Traffic" help="Opt in: keep each completion (after redaction) so it can take feedback; off, nothing of the traffic is kept.">
        <label className="flex items-center gap-2 py-2 text-sm text-neutral-200">
          <input id={`${id}-log`} type="checkbox" className="accent-cta" checked={form.logTraffic} onChange={(e) => onChange({ logTraffic: e.target.checked })} />
          Log traffic
        </label>
      </Row>
      <Row id={`${id}-redact`} label="Redact" error={problems.redactFunction}
        help="Run on every logged text first: pii masks e-mail addresses, phone numbers and long digit runs (not names); a function of yours runs in the server.">
        <div className="flex gap-2">
          <select id={`${id}-redact`} className="input" value={form.redact} onChange={(e) => onChange({ redact: e.target.value as Redact })}>
            <option value="none">nothing</option>
            <option value="pii">pii (built in)</option>
            <option value="function">a function: module:function</option>
          </select>
          {form.redact === 'function' && (
            <input aria-label="Redact function" className="input font-mono" placeholder="mypkg.hooks:scrub" spellCheck={false} value={form.redactFunction}
              onChange={(e) => onChange({ redactFunction: e.target.value })} {...invalidProps(`${id}-redact`, problems.redactFunction)} />
          )}
        </div>
      </Row>
      <Row id={`${id}-retention`} label="Retention (days)" error={problems.retentionDays} help="Logged completions and feedback older than this are deleted.">
        <input id={`${id}-retention`} className="input font-mono" inputMode="decimal" value={form.retentionDays}
          onChange={(e) => onChange({ retentionDays: e.target.value })} {...invalidProps(`${id}-retention`, problems.retentionDays)} />
      </Row>
      <Row id={`${id}-schedule`} label="Schedule (cron, UTC)" error={problems.schedule}
        help={<>When a retraining cycle runs: <span className="text-neutral-300" data-testid="schedule-words">{words}</span>{form.schedule.trim() ? '' : ' (Run cycle now)'}.</>}>
        <input id={`${id}-schedule`} className="input font-mono" list={`${id}-schedule-presets`} placeholder="empty: only when asked, e.g. 0 3 * * *" spellCheck={false}
          value={form.schedule} onChange={(e) => onChange({ schedule: e.target.value })} {...invalidProps(`${id}-schedule`, problems.schedule)} />
        <datalist id={`${id}-schedule-presets`}>
          {SCHEDULE_PRESETS.map((p) => <option key={p.cron} value={p.cron}>{p.words}</option>)}
        </datalist>
      </Row>
      <Row id={`${id}-min`} label="Min feedback" error={problems.minFeedback} help="New feedback rows a cycle needs to train; with fewer it is skipped.">
        <input id={`${id}-min`} className="input font-mono" inputMode="numeric" value={form.minFeedback}
          onChange={(e) => onChange({ minFeedback: e.target.value })} {...invalidProps(`${id}-min`, problems.minFeedback)} />
      </Row>
      <Row id={`${id}-steps`} label="Learn steps" error={problems.learnSteps} help="Optimizer steps of each cycle's learn job (a short DPO or SL update of the served model).">
        <input id={`${id}-steps`} className="input font-mono" inputMode="numeric" value={form.learnSteps}
          onChange={(e) => onChange({ learnSteps: e.target.value })} {...invalidProps(`${id}-steps`, problems.learnSteps)} />
      </Row>
      <Row id={`${id}-eval`} label="Eval set (the gate)" help="The gate's A/B runs on it: a candidate is served only if it beats the served model significantly.">
        <select id={`${id}-eval`} className="input" value={form.evalDatasetId} onChange={(e) => onChange({ evalDatasetId: e.target.value })}>
          <option value="">none</option>
          {/* A dataset no longer listed (deleted) stays visible rather than silently cleared. */}
          {form.evalDatasetId && !evalSets.some((d) => d.id === form.evalDatasetId) && <option value={form.evalDatasetId}>{form.evalDatasetId}</option>}
          {evalSets.map((d) => <option key={d.id} value={d.id}>{d.name} v{d.version} · {d.kind} · {d.num_rows} rows</option>)}
        </select>
        {!form.evalDatasetId && <div className="mt-2"><Warning>Without an eval set the gate refuses every candidate: nothing is ever promoted.</Warning></div>}
      </Row>
    </div>
  )
}

function Row({ id, label, help, error, children }: { id: string; label: string; help: ReactNode; error?: string; children: ReactNode }) {
  return (
    <div>
      <label htmlFor={id} className="label">{label}</label>
      {children}
      <p className="mt-1 text-xs text-neutral-500">{help}</p>
      <FieldError id={id} error={error} />
    </div>
  )
}
