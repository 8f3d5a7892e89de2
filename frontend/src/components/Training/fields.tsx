// The training forms' fields, shared by the new-job form and the wizard: a setting of a job's
// config, the base model (or an eval job's baseline), a dataset of the kinds an algorithm takes.
import { Link } from 'react-router-dom'
import type { Schemas } from '../../api/client'
import { configField, type ConfigSchema } from '../../api/jobConfig'
import type { DatasetKind } from '../../api/vocabulary'
import type { ParamSpec } from './algorithms'
import { invalidProps } from '../ui/aria'
import { FieldError, NumberField } from '../ui/fields'
import type { BaseModelOption } from './contract'
import { InfoTip } from '../ui/InfoTip'

type Dataset = Schemas['DatasetPublic']

/** What an empty field of `key` sends: nothing, so the server proposes it (`proposed`, once
 * the proposal is in) or takes its documented default. */
function emptyMeans(schema: ConfigSchema, key: string, proposed: unknown): { short: string; long: string } {
  const field = configField(schema, key)
  if (field?.proposed) {
    if (proposed === undefined || proposed === null) return { short: 'proposed by the server', long: 'the server proposes it from your data' }
    return { short: `proposed: ${String(proposed)}`, long: `the server's proposal, ${String(proposed)}` }
  }
  const value = JSON.stringify(field?.default ?? null)
  return { short: `default: ${value}`, long: `the default, ${value}` }
}

/** A setting of the new-job form: its help, choices and default from the server's schema.
 * Empty means "the server's proposal" or "the default" (shown as placeholder). */
export function ParamField({
  spec,
  schema,
  value,
  onChange,
  id,
  error,
  proposed,
}: {
  spec: ParamSpec
  /** The config schema the setting is in (its algorithm's, or its RLHF stage's). */
  schema: ConfigSchema
  value: string
  onChange: (v: string) => void
  id: string
  error?: string | null
  /** What the server would use if the field stays empty (for a proposed field). */
  proposed?: unknown
}) {
  const field = configField(schema, spec.key)
  const empty = emptyMeans(schema, spec.key, proposed)
  const help = <>{field?.description} Empty: {empty.long}.</>
  if (field?.options) {
    return (
      <div>
        <label htmlFor={id} className="label flex items-center gap-1.5">
          {spec.label} <InfoTip label={`About ${spec.label}`}>{help}</InfoTip>
        </label>
        <select id={id} className="input" value={value} onChange={(e) => onChange(e.target.value)} {...invalidProps(id, error)}>
          <option value="">{empty.short}</option>
          {field.options.map((o) => <option key={o}>{o}</option>)}
        </select>
        <FieldError id={id} error={error} />
      </div>
    )
  }
  if (field?.text) {
    // free text (a system prompt): the whole row, a few lines tall
    return (
      <div className="sm:col-span-2 xl:col-span-3">
        <label htmlFor={id} className="label flex items-center gap-1.5">
          {spec.label} <InfoTip label={`About ${spec.label}`}>{help}</InfoTip>
        </label>
        <textarea id={id} rows={3} className="input text-xs" value={value} placeholder={empty.short} onChange={(e) => onChange(e.target.value)} {...invalidProps(id, error)} />
        <FieldError id={id} error={error} />
      </div>
    )
  }
  return (
    <NumberField id={id} label={spec.label} help={help} value={value} onChange={onChange} error={error} placeholder={empty.short} />
  )
}

const KIND_LABEL: Record<BaseModelOption['kind'], string> = { builtin: 'built-in', cached: 'downloaded', library: 'your library' }

/** Free text with suggestions: a hub id, a server directory, a built-in or a library model.
 * `evaluate`: the baseline of an eval job, which evaluates a library model rather than
 * continuing it. */
export function BaseModelField({
  id,
  value,
  onChange,
  options,
  error,
  placeholder = 'e.g. Qwen/Qwen3-0.6B',
  evaluate = false,
}: {
  id: string
  value: string
  onChange: (v: string) => void
  options: readonly BaseModelOption[]
  error?: string | null
  placeholder?: string
  evaluate?: boolean
}) {
  const chosen = options.find((o) => o.id === value.trim())
  return (
    <div>
      <label htmlFor={id} className="label">{evaluate ? 'Baseline (A)' : 'Base model'}</label>
      <input
        id={id}
        className={`input font-mono ${error ? 'border-bad/70 focus:border-bad' : ''}`}
        list={`${id}-options`}
        autoComplete="off"
        spellCheck={false}
        placeholder={placeholder}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        {...(error ? invalidProps(id, error) : { 'aria-describedby': `${id}-help` })}
      />
      <datalist id={`${id}-options`}>
        {options.map((o) => (
          <option key={o.id} value={o.id}>{`${o.label} · ${KIND_LABEL[o.kind] ?? o.kind}${o.detail ? ` · ${o.detail}` : ''}`}</option>
        ))}
      </datalist>
      <FieldError id={id} error={error} />
      {chosen && chosen.kind === 'library' && (
        <p className="mt-1 text-xs text-accent">{evaluate ? 'Evaluates' : 'Continues from'} {chosen.label}{chosen.detail ? ` (${chosen.detail})` : ''}.</p>
      )}
      {evaluate ? (
        <p id={`${id}-help`} className="mt-1 text-xs text-neutral-500">
          The model every other one is compared with (A in each comparison), evaluated first: a base model
          (<code className="text-neutral-400">thinker/tiny</code>, a hub id) or a model from your library
          (<code className="text-neutral-400">mdl_…</code>). Suggestions list what this server has.
        </p>
      ) : (
        <p id={`${id}-help`} className="mt-1 text-xs text-neutral-500">
          A Hugging Face hub id (<code className="text-neutral-400">Qwen/Qwen3-0.6B</code>), a model directory on the server,
          a built-in (<code className="text-neutral-400">thinker/tiny</code> trains in seconds on a CPU), or a model from your
          library (<code className="text-neutral-400">mdl_…</code>) to continue training it. Suggestions list what this server has.
        </p>
      )}
    </div>
  )
}

export function DatasetSelect({
  id,
  label,
  kinds,
  datasets,
  value,
  onChange,
}: {
  id: string
  label: string
  kinds: readonly DatasetKind[]
  datasets: readonly Dataset[]
  value: string
  onChange: (v: string) => void
}) {
  const fitting = datasets.filter((d) => kinds.includes(d.kind))
  return (
    <div>
      <label htmlFor={id} className="label">{label} <span className="normal-case tracking-normal text-neutral-600">({kinds.join(' or ')})</span></label>
      {fitting.length ? (
        <select id={id} className="input" value={value} onChange={(e) => onChange(e.target.value)}>
          <option value="">Choose a dataset…</option>
          {fitting.map((d) => (
            <option key={d.id} value={d.id}>
              {d.name} v{d.version} · {d.kind} · {d.num_rows} rows
            </option>
          ))}
        </select>
      ) : (
        <p className="rounded-xl border border-dashed border-ink-600 p-3 text-sm text-neutral-400">
          No {kinds.join(' or ')} dataset yet. <Link to="/datasets" className="text-accent hover:underline">Upload one in Datasets →</Link>
        </p>
      )}
    </div>
  )
}
