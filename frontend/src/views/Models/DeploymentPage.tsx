// One deployment: what it serves, its traffic and feedback, the cycle in flight, its history
// as a timeline of notifications (seen once shown here: the notice badge drops it), its
// settings (changed in place: PATCH of what changed), Run cycle now, Promote a model…, and how
// an app calls it.
import { useEffect, useState, type ReactNode } from 'react'
import { Link, useParams } from 'react-router-dom'
import { CallSnippet } from '../../components/Models/CallSnippet'
import { DeploymentActions } from '../../components/Models/DeploymentActions'
import { DeploymentFields } from '../../components/Models/DeploymentFields'
import { CycleStatus, DeploymentTimeline } from '../../components/Models/DeploymentTimeline'
import { cycleOf, formOf, formProblems, historyOf, nextRunWords, scheduleWords, settingsPatch, timeline, type Deployment, type DeploymentForm } from '../../components/Models/deployments'
import { useNoticesSeen } from '../../components/Models/noticesSeen'
import { useDeployment, useModels, useUpdateDeployment } from '../../components/Models/queries'
import { useDatasets } from '../../components/Training/queries'
import { Chip } from '../../components/ui/Chip'
import { useNow } from '../../hooks/useNow'
import { Section } from '../../components/ui/Section'
import { ErrorState, Loading } from '../../components/ui/States'

export function DeploymentPage() {
  const { name = '' } = useParams()
  const deployment = useDeployment(name)
  const models = useModels({})
  const datasets = useDatasets()
  const markSeen = useNoticesSeen((s) => s.markSeen)
  const update = useUpdateDeployment(name)
  const now = useNow()
  const latestAt = deployment.data ? timeline(historyOf(deployment.data))[0]?.at : undefined
  useEffect(() => {
    if (latestAt !== undefined) markSeen(name, latestAt)
  }, [name, latestAt, markSeen])
  if (deployment.isPending) return <Loading what="deployment" />
  if (deployment.isError) return <><BackLink /><ErrorState error={deployment.error} what={`deployment ${name}`} /></>
  const d = deployment.data
  const names = new Map((models.data?.data ?? []).map((m) => [m.id, m.name]))
  const modelName = (id: string) => names.get(id) ?? id
  const datasetName = (id: string) => {
    const found = datasets.data?.data.find((x) => x.id === id)
    return found ? `${found.name} v${found.version}` : id
  }
  const cycle = cycleOf(d)
  return (
    <div className="flex flex-col gap-5">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <BackLink />
          <h1 className="flex items-center gap-3 font-mono text-2xl font-semibold text-neutral-100">
            {d.name}
            <Chip tone={d.log_traffic ? 'ok' : 'neutral'}>{d.log_traffic ? 'traffic logged' : 'traffic not logged'}</Chip>
          </h1>
          <div className="mt-1 flex flex-wrap items-center gap-x-3 gap-y-1 text-sm text-neutral-400">
            <span>serves <Link to={`/models/${d.model_id}`} className="font-mono text-accent hover:underline" data-testid="served-model">{modelName(d.model_id)}</Link></span>
            <span>· retrains {scheduleWords(d.schedule)}{d.schedule ? `, next ${nextRunWords(d.next_cycle_at, now)}` : ''}</span>
          </div>
        </div>
        <DeploymentActions deployment={d} modelName={modelName} />
      </header>
      <dl className="grid grid-cols-2 gap-3 md:grid-cols-4" aria-label="figures">
        <Figure label="completions kept" value={d.traffic} />
        <Figure label="feedback new / kept" value={`${d.feedback_new} / ${d.feedback}`} note={`a cycle needs ${d.min_feedback}`} />
        <Figure label="feedback dataset" value={d.feedback_dataset_id ? <Link to={`/datasets/${d.feedback_dataset_id}`} className="text-accent hover:underline">{datasetName(d.feedback_dataset_id)}</Link> : '—'} />
        <Figure label="gate's eval set" value={d.eval_dataset_id ? <Link to={`/datasets/${d.eval_dataset_id}`} className="text-accent hover:underline">{datasetName(d.eval_dataset_id)}</Link> : 'none'} />
      </dl>
      {cycle && <CycleStatus cycle={cycle} modelName={modelName} now={now} />}
      <div className="grid gap-5 xl:grid-cols-2">
        <Section title="History">
          <DeploymentTimeline history={historyOf(d)} modelName={modelName} now={now} />
        </Section>
        <Section title="Settings">
          <SettingsForm key={JSON.stringify(formOf(d))} deployment={d} update={update} />
        </Section>
      </div>
      <Section title="Use it from an app"><CallSnippet deployment={d} /></Section>
    </div>
  )
}

function BackLink() {
  return <Link to="/models?view=deployments" className="text-xs uppercase tracking-wider text-neutral-500 hover:text-accent">← deployments</Link>
}

function Figure({ label, value, note }: { label: string; value: ReactNode; note?: string }) {
  return (
    <div className="rounded-xl border border-ink-700 bg-ink-900 p-3">
      <dt className="text-[10px] uppercase tracking-wider text-neutral-500">{label}</dt>
      <dd className="truncate font-mono text-lg text-neutral-100">{value}</dd>
      {note && <dd className="text-xs text-neutral-500">{note}</dd>}
    </div>
  )
}

/** The loop's settings, edited in place; Save sends only what changed. Keyed by the settings
 *  the server holds, so a save (or another tab's) resets the form to them. */
function SettingsForm({ deployment: d, update }: { deployment: Deployment; update: ReturnType<typeof useUpdateDeployment> }) {
  const [form, setForm] = useState<DeploymentForm>(() => formOf(d))
  const problems = formProblems(form, false)
  const valid = Object.keys(problems).length === 0
  const patch = valid ? settingsPatch(d, form) : {}
  const changed = Object.keys(patch).length > 0
  return (
    <form className="flex flex-col gap-4" aria-label="settings" onSubmit={(e) => { e.preventDefault(); if (valid && changed) update.mutate(patch) }}>
      <DeploymentFields id="ds" form={form} onChange={(p) => setForm((f) => ({ ...f, ...p }))} problems={problems} creating={false} />
      {update.isError && <p role="alert" className="text-sm text-bad">Not saved: {update.error.message}</p>}
      <div className="flex items-center justify-end gap-2">
        {update.isSuccess && !changed && <span role="status" className="mr-auto text-xs text-ok">Saved.</span>}
        <button type="button" className="btn-ghost" disabled={!changed && valid} onClick={() => { setForm(formOf(d)); update.reset() }}>Reset</button>
        <button type="submit" className="btn-cta" disabled={!changed || !valid || update.isPending}>{update.isPending ? 'Saving…' : 'Save changes'}</button>
      </div>
    </form>
  )
}
