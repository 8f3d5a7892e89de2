// Sampling controls shared by chat, code review and A/B: the same knobs as POST /api/sample.
import type { SamplingParams } from './sampling'

interface Props {
  value: SamplingParams
  onChange: (value: SamplingParams) => void
}

function Slider(props: {
  label: string; hint: string; min: number; max: number; step: number; value: number
  onChange: (v: number) => void
}) {
  return (
    <label className="block" title={props.hint}>
      <span className="label flex justify-between">
        {props.label} <span className="font-mono text-accent normal-case">{props.value}</span>
      </span>
      <input
        type="range" className="w-full accent-[#0ea5e9]" aria-label={props.label}
        min={props.min} max={props.max} step={props.step} value={props.value}
        onChange={(e) => props.onChange(Number(e.target.value))}
      />
      <span className="mt-0.5 block text-[11px] leading-4 text-neutral-500">{props.hint}</span>
    </label>
  )
}

export function SamplingControls({ value, onChange }: Props) {
  const set = (patch: Partial<SamplingParams>) => onChange({ ...value, ...patch })
  return (
    <div className="flex flex-col gap-4">
      <Slider label="Temperature" hint="0 = always the likeliest token; higher = more varied"
        min={0} max={2} step={0.05} value={value.temperature} onChange={(temperature) => set({ temperature })} />
      <Slider label="Top p" hint="sample only from the smallest set of tokens holding this much probability"
        min={0.05} max={1} step={0.05} value={value.top_p} onChange={(top_p) => set({ top_p })} />
      <label className="block">
        <span className="label">Max tokens</span>
        <input
          type="number" className="input" min={1} max={8192} aria-label="Max tokens" value={value.max_tokens}
          onChange={(e) => set({ max_tokens: Math.min(8192, Math.max(1, Number(e.target.value) || 1)) })}
        />
      </label>
      <label className="block">
        <span className="label">Seed</span>
        <input
          type="number" className="input" placeholder="random" aria-label="Seed"
          value={value.seed ?? ''}
          onChange={(e) => set({ seed: e.target.value === '' ? null : Math.trunc(Number(e.target.value)) })}
        />
        <span className="mt-1 block text-[11px] leading-4 text-neutral-500">empty = random; the same seed gives the same answer</span>
      </label>
    </div>
  )
}
