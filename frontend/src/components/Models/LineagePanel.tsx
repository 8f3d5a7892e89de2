// Where a model came from: base model, dataset version, job, step, and every metric logged
// at that step.
import type { ReactNode } from 'react'
import { Link } from 'react-router-dom'
import { StatusLed } from '../ui/Status'
import { metricValue } from './metrics'
import type { ModelDetail } from './queries'

export function LineagePanel({ model }: { model: ModelDetail }) {
  const { lineage } = model
  return (
    <div className="flex flex-col gap-5">
      <ol className="flex flex-wrap items-stretch gap-2 text-sm">
        <Node label="base model"><span className="font-mono">{lineage.base_model}</span></Node>
        <Arrow />
        <Node label="dataset">
          {lineage.dataset ? (
            lineage.dataset.name ? (
              <Link to={`/datasets/${lineage.dataset.id}`} className="text-accent hover:underline">{lineage.dataset.name}</Link>
            ) : <span className="text-neutral-500" title={lineage.dataset.id}>deleted ({lineage.dataset.id})</span>
          ) : <span className="text-neutral-500">none</span>}
        </Node>
        <Arrow />
        <Node label="job">
          {lineage.job ? (
            <span className="flex items-center gap-3">
              <Link to={`/training/${lineage.job.id}`} className="text-accent hover:underline">{lineage.job.name}</Link>
              <span className="font-mono text-xs uppercase text-neutral-400">{lineage.job.algorithm}</span>
              <StatusLed state={lineage.job.state} />
            </span>
          ) : <span className="font-mono text-neutral-500">{model.job_id}</span>}
        </Node>
        <Arrow />
        <Node label="checkpoint"><span className="font-mono">step {lineage.step}{lineage.stage ? ` · ${lineage.stage}` : ''}</span></Node>
      </ol>
      <MetricsTable metrics={lineage.metrics} />
      <dl className="grid gap-1 text-xs md:grid-cols-[8rem_1fr]">
        <dt className="text-neutral-500">sampler path</dt><dd className="break-all font-mono text-neutral-300">{model.sampler_path}</dd>
        <dt className="text-neutral-500">state path</dt><dd className="break-all font-mono text-neutral-300">{model.state_path ?? '—'}</dd>
        <dt className="text-neutral-500">backend</dt><dd className="font-mono text-neutral-300">{model.backend}</dd>
      </dl>
    </div>
  )
}

function Node({ label, children }: { label: string; children: ReactNode }) {
  return (
    <li className="rounded-xl border border-ink-700 bg-ink-950/60 px-4 py-3">
      <div className="label">{label}</div>
      <div className="text-neutral-100">{children}</div>
    </li>
  )
}

function Arrow() {
  return <li aria-hidden className="flex items-center text-accent">→</li>
}

function MetricsTable({ metrics }: { metrics: Record<string, unknown> }) {
  const entries = Object.entries(metrics).filter(([k]) => k !== 'step')
  if (entries.length === 0) return <p className="text-sm text-neutral-500">No metrics were logged at this step.</p>
  return (
    <div className="grid grid-cols-2 gap-3 md:grid-cols-4">
      {entries.map(([k, v]) => (
        <div key={k} className="rounded-xl border border-ink-700 p-3">
          <div className="truncate text-[10px] uppercase tracking-wider text-neutral-500" title={k}>{k}</div>
          <div className="font-mono text-lg text-neutral-100">{metricValue(v)}</div>
        </div>
      ))}
    </div>
  )
}
