// The Deployments tab: every deployment (its name, the model it serves, whether its traffic is
// logged and how much, its schedule in words with the next run, its feedback new / total, the
// cycle in flight with its jobs, else its latest event, marked "new" when it is an outcome not
// seen yet), and "New deployment". `deploy` opens the dialog on that model (a model's page).
import { useState } from 'react'
import { Link, useNavigate } from 'react-router-dom'
import { useNow } from '../../hooks/useNow'
import { Chip } from '../ui/Chip'
import { Empty, ErrorState, Loading } from '../ui/States'
import { agoWords, cycleOf, historyOf, nextRunWords, scheduleWords, timeline, unseenNotices, type Deployment } from './deployments'
import { NewDeployment } from './NewDeployment'
import { useNoticesSeen } from './noticesSeen'
import { useDeployments, useModels } from './queries'

export function DeploymentsPanel({ deploy, onDeployed }: { deploy?: string; onDeployed?: () => void }) {
  const deployments = useDeployments()
  const models = useModels({})
  const navigate = useNavigate()
  const [creating, setCreating] = useState(false)
  const open = creating || !!deploy
  const close = () => { setCreating(false); onDeployed?.() }
  const names = new Map((models.data?.data ?? []).map((m) => [m.id, m.name]))
  const list = deployments.data ?? []
  const dialog = open && (
    <NewDeployment modelId={deploy} onClose={close} onCreated={(d) => { close(); navigate(`/models/deployments/${encodeURIComponent(d.name)}`) }} />
  )
  if (deployments.isPending) return <Loading what="deployments" />
  if (deployments.isError) return <ErrorState error={deployments.error} what="deployments" />
  return (
    <div className="flex flex-col gap-4">
      <div className="flex flex-wrap items-center gap-3">
        <p className="max-w-3xl text-sm text-neutral-400">
          A deployment is a name apps call through <code className="text-accent">/v1/chat/completions</code>, serving a library model. Opted in,
          its traffic is logged, rated by your app, and turned by a cycle into a candidate that replaces the served model only if it wins an A/B.
        </p>
        <button type="button" className="btn-cta ml-auto" onClick={() => setCreating(true)}>New deployment</button>
      </div>
      {list.length === 0 ? (
        <Empty
          title="No deployment yet"
          next={<>Serve a model from your library under a name, e.g. <code className="text-accent">assistant</code>, and let its feedback train the next one. <button type="button" className="text-accent hover:underline" onClick={() => setCreating(true)}>Create one →</button></>}
        />
      ) : (
        <DeploymentsTable deployments={list} modelName={(id) => names.get(id) ?? id} />
      )}
      {dialog}
    </div>
  )
}

function DeploymentsTable({ deployments, modelName }: { deployments: Deployment[]; modelName: (id: string) => string }) {
  const seen = useNoticesSeen((s) => s.seen)
  const unseen = new Set(unseenNotices(deployments, seen).map((n) => n.name))
  const now = useNow()
  return (
    <div className="card overflow-x-auto p-0">
      <table className="w-full text-left text-sm" aria-label="deployments">
        <thead className="text-xs uppercase tracking-wider text-neutral-500">
          <tr className="border-b border-ink-700">
            <th className="px-4 py-3">name</th>
            <th className="px-3 py-3">serves</th>
            <th className="px-3 py-3">traffic</th>
            <th className="px-3 py-3">schedule</th>
            <th className="px-3 py-3">feedback</th>
            <th className="px-4 py-3">cycle · latest</th>
          </tr>
        </thead>
        <tbody>
          {deployments.map((d) => (
            <Row key={d.name} d={d} modelName={modelName} isNew={unseen.has(d.name)} now={now} />
          ))}
        </tbody>
      </table>
    </div>
  )
}

function Row({ d, modelName, isNew, now }: { d: Deployment; modelName: (id: string) => string; isNew: boolean; now: number }) {
  const cycle = cycleOf(d)
  const [latest] = timeline(historyOf(d))
  return (
    <tr data-testid={`deployment-${d.name}`} className="border-b border-ink-700/60 last:border-0 hover:bg-ink-800/60">
      <td className="px-4 py-3">
        <Link to={`/models/deployments/${encodeURIComponent(d.name)}`} className="font-mono font-medium text-neutral-100 hover:text-accent">{d.name}</Link>
      </td>
      <td className="px-3 py-3">
        <Link to={`/models/${d.model_id}`} className="text-neutral-200 hover:text-accent">{modelName(d.model_id)}</Link>
        <div className="font-mono text-xs text-neutral-500">{d.model_id}</div>
      </td>
      <td className="px-3 py-3 text-xs">
        <span className="inline-flex items-center gap-2">
          <span className={`led ${d.log_traffic ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-neutral-600'}`} aria-hidden />
          {d.log_traffic ? 'logged' : 'not logged'}
        </span>
        <div className="text-neutral-500">{d.traffic} completion{d.traffic === 1 ? '' : 's'} kept</div>
      </td>
      <td className="px-3 py-3 text-xs">
        <div className="text-neutral-200">{scheduleWords(d.schedule)}</div>
        {d.schedule && <div className="text-neutral-500">next {nextRunWords(d.next_cycle_at, now)}</div>}
      </td>
      <td className="px-3 py-3 font-mono text-xs text-neutral-300" title="new since the last cycle / kept">
        {d.feedback_new} new / {d.feedback}
      </td>
      <td className="px-4 py-3 text-xs">
        {cycle ? (
          <span className="flex flex-wrap items-center gap-2">
            <Chip tone="accent">{cycle.stage}</Chip>
            {[cycle.learn_job_id, cycle.eval_job_id].filter(Boolean).map((j) => (
              <Link key={j} to={`/training/${j}`} className="font-mono text-accent hover:underline">{j}</Link>
            ))}
          </span>
        ) : latest ? (
          <span className="flex flex-wrap items-center gap-2">
            <Chip tone={latest.tone}>{latest.title}</Chip>
            <span className="text-neutral-500">{agoWords(latest.at, now)}</span>
            {isNew && <span className="font-semibold uppercase tracking-wider text-cta">new</span>}
          </span>
        ) : (
          <span className="text-neutral-500">no cycle yet</span>
        )}
      </td>
    </tr>
  )
}
