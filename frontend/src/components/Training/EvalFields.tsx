// The new-job form's fields of an eval job: the models compared with the baseline (ticked from
// the library, or a base model by name), the scorer (with its pattern or function), and what the
// job will do.
import { useState } from 'react'
import { Link } from 'react-router-dom'
import type { Model } from '../Models/queries'
import { FieldError } from '../ui/fields'
import { InfoTip } from '../ui/InfoTip'
import type { BaseModelOption } from './contract'
import { SCORER_HELP } from './evaluation'

/** The models compared with the baseline, in the order they are evaluated (B1, B2, …): library
 * models ticked from a list (those of the job's backend), base models added by name. */
export function EvalModelPicker({
  id,
  value,
  onChange,
  models,
  suggestions,
  baseline,
  max,
  error,
}: {
  id: string
  value: readonly string[]
  onChange: (v: string[]) => void
  /** The library's models the job can evaluate. */
  models: readonly Model[]
  /** Base models to suggest by name (built-ins, downloaded). */
  suggestions: readonly BaseModelOption[]
  baseline: string
  max: number
  error?: string | null
}) {
  const [search, setSearch] = useState('')
  const [other, setOther] = useState('')
  const names = new Map(models.map((m) => [m.id, m.name]))
  const full = value.length >= max
  const toggle = (ref: string) => onChange(value.includes(ref) ? value.filter((v) => v !== ref) : [...value, ref])
  const add = () => {
    const ref = other.trim()
    if (ref && !value.includes(ref) && ref !== baseline && !full) onChange([...value, ref])
    setOther('')
  }
  const shown = models.filter((m) => `${m.name} ${m.id} ${m.base_model}`.toLowerCase().includes(search.trim().toLowerCase()))
  return (
    <div className="flex flex-col gap-3">
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <span className="label mb-0 flex items-center gap-1.5">
          Models to compare (B)
          <InfoTip label="About the models to compare">
            Each is evaluated after the baseline, in this order, and compared with it and with every other one (the earlier of two is A).
            Up to {max}.
          </InfoTip>
        </span>
        <span className="text-xs text-neutral-500">{value.length} of at most {max} chosen</span>
      </div>
      {value.length > 0 && (
        <ol aria-label="models to compare" className="flex flex-wrap gap-2">
          {value.map((ref, i) => (
            <li key={ref} className="inline-flex items-center gap-2 rounded-full border border-accent/40 bg-accent/5 px-3 py-1 text-xs text-neutral-200">
              <span className="font-mono text-accent">B{value.length > 1 ? i + 1 : ''}</span>
              <span>{names.get(ref) ?? ref}</span>
              <button type="button" aria-label={`remove ${names.get(ref) ?? ref}`} className="text-neutral-500 hover:text-bad" onClick={() => toggle(ref)}>✕</button>
            </li>
          ))}
        </ol>
      )}
      {models.length === 0 ? (
        <p className="rounded-xl border border-dashed border-ink-600 p-3 text-sm text-neutral-400">
          No model in your library yet: <Link to="/training/wizard" className="text-accent hover:underline">train one</Link>, or compare a base model by name below.
        </p>
      ) : (
        <>
          {models.length > 6 && (
            <input className="input" aria-label="search models" placeholder="search the library…" value={search} onChange={(e) => setSearch(e.target.value)} />
          )}
          <ul aria-label="library models" className="max-h-64 overflow-y-auto rounded-xl border border-ink-700">
            {shown.map((m) => {
              const checked = value.includes(m.id)
              const isBaseline = m.id === baseline
              return (
                <li key={m.id} className="border-b border-ink-700/60 last:border-0">
                  <label className={`flex items-center gap-3 px-3 py-2 text-sm ${isBaseline ? 'opacity-50' : 'cursor-pointer hover:bg-ink-800/60'}`}>
                    <input
                      type="checkbox"
                      className="accent-cta"
                      aria-label={`evaluate ${m.name}`}
                      checked={checked}
                      disabled={isBaseline || (full && !checked)}
                      onChange={() => toggle(m.id)}
                    />
                    <span className="min-w-0 flex-1">
                      <span className="text-neutral-100">{m.name}</span>
                      <span className="ml-2 font-mono text-xs text-neutral-500">{m.id} · {m.base_model} · step {m.step}</span>
                    </span>
                    {isBaseline && <span className="text-xs text-neutral-500">the baseline</span>}
                  </label>
                </li>
              )
            })}
            {shown.length === 0 && <li className="px-3 py-2 text-sm text-neutral-500">No model matches "{search}".</li>}
          </ul>
        </>
      )}
      <div className="flex flex-wrap items-end gap-2">
        <div className="min-w-0 flex-1">
          <label htmlFor={`${id}-other`} className="label">Or a base model</label>
          <input
            id={`${id}-other`}
            className="input font-mono"
            list={`${id}-other-options`}
            autoComplete="off"
            spellCheck={false}
            placeholder="e.g. Qwen/Qwen3-0.6B"
            value={other}
            onChange={(e) => setOther(e.target.value)}
            onKeyDown={(e) => { if (e.key === 'Enter') { e.preventDefault(); add() } }}
          />
          <datalist id={`${id}-other-options`}>
            {suggestions.filter((o) => o.kind !== 'library').map((o) => <option key={o.id} value={o.id}>{o.label}</option>)}
          </datalist>
        </div>
        <button type="button" className="btn-ghost" disabled={!other.trim() || full} onClick={add}>Add</button>
      </div>
      <FieldError id={id} error={error} />
    </div>
  )
}

/** The scorer: its type (the server's choices), and the pattern of a regex, the function of
 * a python scorer or the reward model of a reward_model one. */
export function ScorerFields({
  id,
  types,
  type,
  pattern,
  fn,
  rewardModel,
  judgeModel,
  judgeUrl,
  onChange,
}: {
  id: string
  types: readonly string[]
  type: string
  pattern: string
  fn: string
  rewardModel: string
  judgeModel: string
  judgeUrl: string
  onChange: (patch: { scorer?: string; scorerPattern?: string; scorerFunction?: string; scorerRewardModel?: string; scorerJudgeModel?: string; scorerJudgeUrl?: string }) => void
}) {
  return (
    <div className="flex flex-col gap-3 sm:col-span-2 xl:col-span-3">
      <div className="grid gap-4 sm:grid-cols-2">
        <div>
          <label htmlFor={id} className="label">Scorer</label>
          <select id={id} className="input" value={type} onChange={(e) => onChange({ scorer: e.target.value })}>
            {types.map((t) => <option key={t} value={t}>{t}</option>)}
          </select>
        </div>
        {type === 'regex' && (
          <div>
            <label htmlFor={`${id}-pattern`} className="label">Pattern</label>
            <input id={`${id}-pattern`} className="input font-mono" spellCheck={false} placeholder="e.g. ^\d+$" value={pattern} onChange={(e) => onChange({ scorerPattern: e.target.value })} />
          </div>
        )}
        {type === 'python' && (
          <div>
            <label htmlFor={`${id}-function`} className="label">Function</label>
            <input id={`${id}-function`} className="input font-mono" spellCheck={false} placeholder="module:function" value={fn} onChange={(e) => onChange({ scorerFunction: e.target.value })} />
          </div>
        )}
        {type === 'reward_model' && (
          <div>
            <label htmlFor={`${id}-reward-model`} className="label">Reward model</label>
            <input id={`${id}-reward-model`} className="input font-mono" spellCheck={false} placeholder="mdl_… (an RLHF job's rm stage)" value={rewardModel} onChange={(e) => onChange({ scorerRewardModel: e.target.value })} />
          </div>
        )}
        {type === 'llm_judge' && (
          <>
            <div>
              <label htmlFor={`${id}-judge-model`} className="label">Judge model</label>
              <input id={`${id}-judge-model`} className="input font-mono" spellCheck={false} placeholder="mdl_…, a base model, or the endpoint's model" value={judgeModel} onChange={(e) => onChange({ scorerJudgeModel: e.target.value })} />
            </div>
            <div>
              <label htmlFor={`${id}-judge-url`} className="label">Judge endpoint</label>
              <input id={`${id}-judge-url`} className="input font-mono" spellCheck={false} placeholder="empty: a model Thinker serves; or https://…/v1" value={judgeUrl} onChange={(e) => onChange({ scorerJudgeUrl: e.target.value })} />
            </div>
          </>
        )}
      </div>
      <p className="text-xs text-neutral-500" data-testid="scorer-help">{SCORER_HELP[type] ?? ''}</p>
    </div>
  )
}

/** What an eval job will do, from the form (the aside's card). */
export function EvalCard({ baseline, models, names, rows, scorer }: { baseline: string; models: readonly string[]; names: Map<string, string>; rows: number | null; scorer: string }) {
  const label = (ref: string) => names.get(ref) ?? ref
  return (
    <section className="card flex flex-col gap-2 text-sm text-neutral-300" aria-label="evaluation plan">
      <h2 className="label">What it does</h2>
      <p>
        <b>{label(baseline) || 'The baseline'}</b>
        {models.length ? <> and <b>{models.map(label).join(', ')}</b></> : ' and the models you choose'} answer{' '}
        {rows === null ? 'every prompt of the eval set' : <>each of its <b>{rows} prompts</b></>}; each answer is scored by <code className="text-accent">{scorer}</code>.
      </p>
      <p className="text-xs text-neutral-400">
        Every pair is compared prompt by prompt: the later model's win rate with its bootstrap 95% interval, significant or not by a sign
        test (ties left out). Nothing is trained: the verdicts, a leaderboard and every answer are on the job's page.
      </p>
    </section>
  )
}
