// An RL (or RLHF stage 3) job's rollouts of one step: each prompt's group of completions with
// their rewards and advantages, a step picker, and the histogram of the step's rewards.
import { useState } from 'react'
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts'
import { Empty, ErrorState, Loading } from '../ui/States'
import { formatValue } from '../../lib/metrics'
import { useRollouts } from './queries'

export interface RolloutGroup {
  prompt: string
  answer?: string | null
  completions: string[]
  rewards: number[]
  advantages: number[]
  dropped?: boolean
}

function asGroups(data: readonly Record<string, unknown>[]): RolloutGroup[] {
  return data.map((g) => ({
    prompt: String(g.prompt ?? ''),
    answer: typeof g.answer === 'string' ? g.answer : null,
    completions: Array.isArray(g.completions) ? g.completions.map(String) : [],
    rewards: Array.isArray(g.rewards) ? g.rewards.map(Number) : [],
    advantages: Array.isArray(g.advantages) ? g.advantages.map(Number) : [],
    dropped: g.dropped === true,
  }))
}

/** Rewards into equal-width bins; a single bin when every reward is the same. */
function histogram(values: readonly number[], bins = 10): { label: string; count: number }[] {
  if (!values.length) return []
  const lo = Math.min(...values)
  const hi = Math.max(...values)
  if (lo === hi) return [{ label: formatValue(lo), count: values.length }]
  const width = (hi - lo) / bins
  const counts = new Array<number>(bins).fill(0)
  for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / width))]++
  return counts.map((count, i) => ({ label: formatValue(lo + (i + 0.5) * width), count }))
}

export function RewardHistogram({ rewards }: { rewards: readonly number[] }) {
  const data = histogram(rewards)
  return (
    <div className="card p-4">
      <h4 className="text-sm font-medium text-neutral-200">Reward histogram</h4>
      <p className="text-xs text-neutral-500">{rewards.length} completions this step. A single bar means every completion scored alike: no signal.</p>
      <div className="mt-2 h-44">
        <ResponsiveContainer width="100%" height="100%">
          <BarChart data={data} margin={{ top: 4, right: 8, bottom: 0, left: -20 }}>
            <CartesianGrid stroke="#2a2a2a" strokeDasharray="3 3" />
            <XAxis dataKey="label" tick={{ fill: '#737373', fontSize: 10 }} stroke="#3a3a3a" />
            <YAxis allowDecimals={false} tick={{ fill: '#737373', fontSize: 10 }} stroke="#3a3a3a" />
            <Tooltip contentStyle={{ background: '#161616', border: '1px solid #3a3a3a', borderRadius: 12, fontSize: 12 }} />
            <Bar dataKey="count" fill="#14b8a6" radius={[4, 4, 0, 0]} isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      </div>
    </div>
  )
}

const tone = (v: number) => (v > 0 ? 'text-ok' : v < 0 ? 'text-bad' : 'text-neutral-500')

function Group({ group, index }: { group: RolloutGroup; index: number }) {
  return (
    <article className={`card p-4 ${group.dropped ? 'opacity-60' : ''}`}>
      <header className="mb-2 flex flex-wrap items-baseline justify-between gap-2">
        <h4 className="text-sm text-neutral-400">
          Group {index + 1}
          {group.dropped && <span className="ml-2 rounded bg-ink-700 px-1.5 py-0.5 text-xs text-warn">dropped: all rewards equal</span>}
        </h4>
        {group.answer && <span className="text-xs text-neutral-500">reference answer <code className="text-cta">{group.answer}</code></span>}
      </header>
      <p className="mb-3 whitespace-pre-wrap rounded-lg bg-ink-950 p-2 font-mono text-xs text-neutral-200">{group.prompt}</p>
      <table className="w-full text-xs">
        <thead className="text-left text-neutral-500">
          <tr><th className="py-1">Completion</th><th className="w-20 py-1 text-right">Reward</th><th className="w-24 py-1 text-right">Advantage</th></tr>
        </thead>
        <tbody>
          {group.completions.map((c, i) => (
            <tr key={i} className="border-t border-ink-800">
              <td className="py-1 pr-2 font-mono whitespace-pre-wrap break-all text-neutral-300">{c || <i className="text-neutral-600">(empty)</i>}</td>
              <td className="py-1 text-right font-mono">{formatValue(group.rewards[i])}</td>
              <td className={`py-1 text-right font-mono ${tone(group.advantages[i] ?? 0)}`}>{formatValue(group.advantages[i])}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </article>
  )
}

export function Rollouts({ jobId, live }: { jobId: string; live: boolean }) {
  const [step, setStep] = useState<number | null>(null)
  const rollouts = useRollouts(jobId, step, live)
  if (rollouts.isLoading) return <Loading what="rollouts" />
  if (rollouts.isError) {
    const notYet = /no rollouts/i.test(String(rollouts.error))
    return notYet ? (
      <Empty title="No rollouts yet" next="Each RL step samples completions and writes them here; the first appear after step 1." />
    ) : (
      <ErrorState error={rollouts.error} what="rollouts" />
    )
  }
  const steps = rollouts.data?.steps ?? []
  const shown = rollouts.data?.step ?? null
  const groups = asGroups(rollouts.data?.data ?? [])
  if (!steps.length || shown === null) {
    return <Empty title="No rollouts yet" next="Each RL step samples completions and writes them here; the first appear after step 1." />
  }
  const idx = steps.indexOf(shown)
  const rewards = groups.flatMap((g) => g.rewards)
  return (
    <div className="flex flex-col gap-4">
      <div className="card flex flex-wrap items-center gap-3 p-3">
        <span className="label mb-0">Step</span>
        <button type="button" className="btn-ghost px-2 py-1" disabled={idx <= 0} onClick={() => setStep(steps[idx - 1])} aria-label="Previous step">←</button>
        <select aria-label="Rollout step" className="input w-28" value={shown} onChange={(e) => setStep(Number(e.target.value))}>
          {steps.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <button type="button" className="btn-ghost px-2 py-1" disabled={idx >= steps.length - 1} onClick={() => setStep(steps[idx + 1])} aria-label="Next step">→</button>
        <button type="button" className="btn-ghost px-2 py-1 text-xs" onClick={() => setStep(null)}>Latest{live ? ' (follows)' : ''}</button>
        <span className="ml-auto text-xs text-neutral-500">
          {groups.length} prompts · mean reward {formatValue(rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length))} ·
          advantage = reward − the group's mean
        </span>
      </div>
      <div className="grid gap-4 xl:grid-cols-[1fr_2fr]">
        <RewardHistogram rewards={rewards} />
        <div className="flex max-h-[36rem] flex-col gap-3 overflow-y-auto pr-1">
          {groups.map((g, i) => <Group key={i} group={g} index={i} />)}
        </div>
      </div>
    </div>
  )
}
