// Live charts for every metric a job logs, grouped by section (loss, reward, KL, ...). Each
// chart is titled with the metric's meaning and healthy range (lib/metrics.ts) and shows a
// warning when the latest value leaves that range.
import { useState } from 'react'
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts'
import { CHART_TITLES, SECTIONS, checkMetric, formatValue, metricInfo, metricOrder, type SeriesMap } from '../../lib/metrics'
import { sortStages, STAGE_LABEL, type StageSeries } from './series'
import { Warning } from '../ui/Warning'
import { InfoTip } from '../ui/InfoTip'
import { Tabs } from '../ui/Tabs'

const COLORS = ['#0ea5e9', '#14b8a6', '#f59e0b', '#a78bfa', '#f472b6']

interface ChartSpec {
  id: string
  keys: string[]
}

/** Metrics sharing a chart id go on one chart, in the order they were first logged. */
function chartsOf(keys: readonly string[]): { section: string; charts: ChartSpec[] }[] {
  const charts = new Map<string, ChartSpec>()
  for (const key of [...keys].sort((a, b) => metricOrder(a) - metricOrder(b))) {
    const chart = metricInfo(key).chart
    const spec = charts.get(chart) ?? { id: chart, keys: [] }
    spec.keys.push(key)
    charts.set(chart, spec)
  }
  return SECTIONS.map((s) => ({
    section: s.id,
    charts: [...charts.values()].filter((c) => metricInfo(c.keys[0]).section === s.id),
  })).filter((g) => g.charts.length > 0)
}

export function MetricChart({ spec, rows, series }: { spec: ChartSpec; rows: Record<string, number>[]; series: SeriesMap }) {
  const title = CHART_TITLES[spec.id] ?? metricInfo(spec.keys[0]).label
  const warnings = spec.keys
    .map((k) => ({ key: k, text: checkMetric(k, series[k] ?? [], series) }))
    .filter((w): w is { key: string; text: string } => w.text !== null)
  // Held-out metrics are logged every eval_every steps only: draw them as connected points.
  const data = rows.filter((r) => spec.keys.some((k) => r[k] !== undefined))
  return (
    <article className={`card flex flex-col gap-2 p-4 ${warnings.length ? 'border-warn/50' : ''}`} aria-label={title}>
      <header className="flex items-start justify-between gap-2">
        <h4 className="flex items-center gap-2 text-sm font-medium text-neutral-200">
          {title}
          <InfoTip label={`About ${title}`}>
            {spec.keys.map((k) => (
              <span key={k} className="mb-2 block last:mb-0">
                <b className="font-mono text-accent">{k}</b> — {metricInfo(k).meaning}
                <span className="mt-1 block text-ok">Healthy: {metricInfo(k).healthy}</span>
              </span>
            ))}
          </InfoTip>
        </h4>
        <div className="text-right font-mono text-xs">
          {spec.keys.map((k, i) => (
            <div key={k} style={{ color: COLORS[i % COLORS.length] }}>
              {spec.keys.length > 1 && <span className="mr-1.5 font-sans text-neutral-500">{metricInfo(k).label}</span>}
              <span data-testid={`latest-${k}`}>{formatValue(series[k]?.[series[k].length - 1])}</span>
            </div>
          ))}
        </div>
      </header>
      <div className="h-40">
        <ResponsiveContainer width="100%" height="100%">
          <LineChart data={data} margin={{ top: 4, right: 8, bottom: 0, left: -6 }}>
            <CartesianGrid stroke="#2a2a2a" strokeDasharray="3 3" />
            <XAxis dataKey="step" type="number" domain={['dataMin', 'dataMax']} tick={{ fill: '#737373', fontSize: 10 }} stroke="#3a3a3a" />
            <YAxis tick={{ fill: '#737373', fontSize: 10 }} stroke="#3a3a3a" domain={['auto', 'auto']} tickFormatter={(v: number) => formatValue(v)} width={62} />
            <Tooltip
              contentStyle={{ background: '#161616', border: '1px solid #3a3a3a', borderRadius: 12, fontSize: 12 }}
              labelFormatter={(s) => `step ${String(s)}`}
              formatter={(v) => formatValue(typeof v === 'number' ? v : Number(v))}
            />
            {spec.keys.length > 1 && <Legend wrapperStyle={{ fontSize: 11 }} />}
            {spec.keys.map((k, i) => (
              <Line
                key={k}
                type="monotone"
                dataKey={k}
                name={metricInfo(k).label}
                stroke={COLORS[i % COLORS.length]}
                strokeWidth={1.75}
                // Held-out figures are dashed: the same quantity, measured on unseen data.
                strokeDasharray={k.startsWith('eval_') || k.startsWith('rm_eval_') ? '5 3' : undefined}
                dot={(series[k]?.length ?? 0) < 30}
                connectNulls
                isAnimationActive={false}
              />
            ))}
          </LineChart>
        </ResponsiveContainer>
      </div>
      {warnings.map((w) => (
        <Warning key={w.key}>
          <b>{metricInfo(w.key).label}</b> {w.text}
        </Warning>
      ))}
    </article>
  )
}

function StageCharts({ stage }: { stage: StageSeries }) {
  const groups = chartsOf(stage.keys)
  return (
    <div className="flex flex-col gap-6">
      {groups.map((g) => {
        const section = SECTIONS.find((s) => s.id === g.section)
        return (
          <section key={g.section}>
            <h3 className="mb-2 text-xs uppercase tracking-[0.2em] text-neutral-500">
              {section?.title} <span className="normal-case tracking-normal text-neutral-600">· {section?.blurb}</span>
            </h3>
            <div className="grid gap-3 lg:grid-cols-2 2xl:grid-cols-3">
              {g.charts.map((c) => (
                <MetricChart key={c.id} spec={c} rows={stage.rows} series={stage.series} />
              ))}
            </div>
          </section>
        )
      })}
    </div>
  )
}

export function MetricsPanel({ stages }: { stages: StageSeries[] }) {
  const sorted = sortStages(stages)
  const [picked, setPicked] = useState<string | null>(null)
  const current = sorted.find((s) => s.stage === picked) ?? sorted[sorted.length - 1]
  if (!current) return null
  return (
    <div className="flex flex-col gap-4">
      {sorted.length > 1 && (
        <Tabs
          tabs={sorted.map((s) => ({ id: s.stage, label: STAGE_LABEL[s.stage] ?? s.stage }))}
          value={current.stage}
          onChange={setPicked}
        />
      )}
      <StageCharts stage={current} />
    </div>
  )
}
