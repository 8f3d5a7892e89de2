// Statistics of the whole dataset as training would see it: token figures, the length
// histogram, and the rows that would waste or break a run.
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts'
import type { Schemas } from '../../api/client'
import { Loading } from '../ui/States'
import { formatNumber } from './format'
import { RenderError } from './PreviewPanel'
import { useStats, type RenderOptions } from './queries'

type Stats = Schemas['DatasetStats']
type LineCount = Schemas['LineCount']

export function StatsPanel({ id, options }: { id: string; options: RenderOptions }) {
  const stats = useStats(id, options)
  if (stats.isPending) return <Loading what="statistics (every row is rendered once)" />
  if (stats.isError) return <RenderError error={stats.error} />
  const s = stats.data
  return (
    <div className="flex flex-col gap-5">
      <TrainableBanner stats={s} />
      <div className="grid gap-4 md:grid-cols-2">
        <SummaryCard title="tokens per row" summary={s.tokens} />
        <SummaryCard title="trained tokens per row" summary={s.trained_tokens} />
      </div>
      <Histogram bins={s.histogram} />
      <div className="grid gap-3 md:grid-cols-2 xl:grid-cols-3">
        <Warning label={`truncated (over ${s.max_length} tokens)`} count={s.truncated} tone="warn"
          why="allowed, but the end of these rows never reaches the model" />
        <Warning label="truncated, losing trained tokens" count={s.truncated_losing_trained} tone="warn"
          why="the cut removes text the model should learn: raise max_length or shorten them" />
        <Warning label="zero trained tokens" count={s.zero_trained} tone="bad"
          why="these rows train nothing (e.g. a conversation ending with the user)" />
        <Warning label="unrenderable" count={s.unrenderable} tone="bad" why="the renderer refuses these rows" />
        {s.identical_pairs && (
          <Warning label="identical pairs" count={s.identical_pairs} tone="bad"
            why="chosen and rejected render alike: DPO learns nothing from them" />
        )}
        {s.empty_sides && (
          <Warning label="pairs with an empty side" count={s.empty_sides} tone="bad" why="one side trains no token" />
        )}
      </div>
      <ExtraFacts stats={s} />
    </div>
  )
}

function TrainableBanner({ stats }: { stats: Stats }) {
  const ok = stats.trainable
  return (
    <div className={`flex items-center gap-3 rounded-xl border px-4 py-3 text-sm ${ok ? 'border-ok/40 bg-ok/5' : 'border-bad/50 bg-bad/5'}`}>
      <span className={`led ${ok ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-bad shadow-[0_0_8px_#ef4444]'}`} />
      <span className={ok ? 'text-ok' : 'text-bad'}>{ok ? 'Trainable' : 'Not trainable'}</span>
      <span className="text-neutral-400">
        {stats.rows.toLocaleString()} rows · {stats.tokens.total.toLocaleString()} tokens ·{' '}
        {stats.trained_tokens.total.toLocaleString()} trained
        {stats.error_count > 0 && ` · ${stats.error_count} row errors`}
      </span>
    </div>
  )
}

function SummaryCard({ title, summary }: { title: string; summary: Schemas['Summary'] }) {
  const cells: [string, number][] = [['min', summary.min], ['mean', summary.mean], ['median', summary.median], ['p95', summary.p95], ['max', summary.max]]
  return (
    <div className="rounded-xl border border-ink-700 p-4">
      <div className="label">{title}</div>
      <div className="mt-2 grid grid-cols-5 gap-2">
        {cells.map(([label, value]) => (
          <div key={label}>
            <div className="text-[10px] uppercase text-neutral-500">{label}</div>
            <div className="font-mono text-lg text-neutral-100">{formatNumber(value)}</div>
          </div>
        ))}
      </div>
    </div>
  )
}

function Histogram({ bins }: { bins: Schemas['HistogramBin'][] }) {
  const data = bins.map((b) => ({ range: `${b.lo}–${b.hi - 1}`, count: b.count }))
  return (
    <div className="rounded-xl border border-ink-700 p-4">
      <div className="label">length histogram (tokens per row)</div>
      <div className="h-56" data-testid="length-histogram">
        <ResponsiveContainer width="100%" height="100%">
          <BarChart data={data} margin={{ top: 10, right: 10, bottom: 0, left: -10 }}>
            <CartesianGrid stroke="#2a2a2a" vertical={false} />
            <XAxis dataKey="range" stroke="#737373" fontSize={11} />
            <YAxis stroke="#737373" fontSize={11} allowDecimals={false} />
            <Tooltip cursor={{ fill: '#1f1f1f' }} contentStyle={{ background: '#161616', border: '1px solid #3a3a3a', borderRadius: 12 }} />
            <Bar dataKey="count" name="rows" fill="#0ea5e9" radius={[6, 6, 0, 0]} maxBarSize={72} />
          </BarChart>
        </ResponsiveContainer>
      </div>
    </div>
  )
}

function Warning({ label, count, tone, why }: { label: string; count: LineCount; tone: 'warn' | 'bad'; why: string }) {
  const hit = count.count > 0
  const color = !hit ? 'text-neutral-400' : tone === 'bad' ? 'text-bad' : 'text-warn'
  return (
    <div className={`rounded-xl border p-3 ${hit ? (tone === 'bad' ? 'border-bad/40' : 'border-warn/40') : 'border-ink-700'}`}>
      <div className="flex items-baseline justify-between gap-2">
        <span className="text-xs uppercase tracking-wider text-neutral-400">{label}</span>
        <span className={`font-mono text-lg ${color}`}>{count.count.toLocaleString()}</span>
      </div>
      {hit && (
        <>
          <p className="mt-1 text-xs text-neutral-400">{why}</p>
          {count.lines && count.lines.length > 0 && (
            <p className="mt-1 font-mono text-xs text-neutral-500">lines {count.lines.slice(0, 20).join(', ')}{count.count > count.lines.length ? ', …' : ''}</p>
          )}
        </>
      )}
    </div>
  )
}

function ExtraFacts({ stats }: { stats: Stats }) {
  const roles = Object.entries(stats.roles).map(([r, n]) => `${r} ${n}`).join(', ')
  const turns = Object.entries(stats.turns).map(([t, n]) => `${t} messages: ${n}`).join(', ')
  return (
    <dl className="grid gap-x-6 gap-y-1 text-sm text-neutral-400 md:grid-cols-[auto_1fr]">
      {roles && (<><dt className="label">roles</dt><dd className="font-mono">{roles}</dd></>)}
      {turns && (<><dt className="label">turns</dt><dd className="font-mono">{turns}</dd></>)}
      {stats.with_answer != null && (<><dt className="label">with answer</dt><dd className="font-mono">{stats.with_answer}</dd></>)}
      {stats.with_tests != null && (<><dt className="label">with tests</dt><dd className="font-mono">{stats.with_tests}</dd></>)}
      {stats.errors.length > 0 && (
        <>
          <dt className="label text-bad">errors</dt>
          <dd className="font-mono text-bad">{stats.errors.map((e) => `line ${e.line}: ${e.message}`).join(' · ')}</dd>
        </>
      )}
    </dl>
  )
}
