// The selected runs' curves of one metric, overlaid on a shared step axis.
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts'
import { formatNumber, mergeSeries, type MetricRow } from './metrics'
import { runColor } from './palette'

export interface Run {
  id: string
  name: string
  rows: MetricRow[]
}

interface Props {
  runs: Run[]
  metric: string
  metrics: string[]
  onMetric: (metric: string) => void
}

export function MetricChart({ runs, metric, metrics, onMetric }: Props) {
  const data = mergeSeries(runs, metric)
  return (
    <div className="card">
      <div className="mb-4 flex items-center gap-3">
        <h2 className="font-semibold text-neutral-100">Metric curves</h2>
        <select className="input ml-auto w-60 py-1" aria-label="Metric" value={metric} onChange={(e) => onMetric(e.target.value)}>
          {metrics.map((m) => <option key={m} value={m}>{m}</option>)}
        </select>
      </div>
      {data.length === 0 ? (
        <p className="py-16 text-center text-sm text-neutral-500">No run logged {metric || 'metrics'} yet.</p>
      ) : (
        <div className="h-[320px]">
          <ResponsiveContainer width="100%" height="100%">
            <LineChart data={data} margin={{ top: 5, right: 16, bottom: 5, left: 0 }}>
              <CartesianGrid stroke="#2a2a2a" strokeDasharray="3 3" />
              <XAxis dataKey="step" type="number" domain={['dataMin', 'dataMax']} stroke="#737373" fontSize={12} />
              <YAxis stroke="#737373" fontSize={12} width={64} tickFormatter={formatNumber} domain={['auto', 'auto']} />
              <Tooltip
                contentStyle={{ background: '#161616', border: '1px solid #2a2a2a', borderRadius: 12 }}
                labelFormatter={(step) => `step ${String(step)}`}
                formatter={(value) => (typeof value === 'number' ? formatNumber(value) : String(value))}
              />
              <Legend wrapperStyle={{ fontSize: 12 }} />
              {runs.map((run, i) => (
                // connectNulls: eval metrics are logged every N steps, not at each one.
                <Line key={run.id} dataKey={run.id} name={run.name} stroke={runColor(i)} dot={data.length < 30}
                  strokeWidth={2} connectNulls isAnimationActive={false} />
              ))}
            </LineChart>
          </ResponsiveContainer>
        </div>
      )}
    </div>
  )
}
