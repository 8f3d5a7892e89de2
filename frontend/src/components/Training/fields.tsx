// Form fields shared by the new-job form and the wizard. A field's problem shows under it,
// tied to the input (aria-invalid, aria-describedby) so a screen reader reads it too.
import type { ReactNode } from 'react'
import { Link } from 'react-router-dom'
import type { Schemas } from '../../api/client'
import type { DatasetKind, ParamSpec } from './algorithms'
import type { BaseModelOption } from './contract'
import { InfoTip } from './ui'

type Dataset = Schemas['DatasetPublic']

/** The message under a field; its id is what the input's aria-describedby names. */
export function FieldError({ id, error }: { id: string; error: string | null | undefined }) {
  if (!error) return null
  return <p id={`${id}-error`} role="alert" className="mt-1 text-xs text-bad">{error}</p>
}

/** Props that tie an input to its error message. */
function invalidProps(id: string, error: string | null | undefined) {
  return error ? { 'aria-invalid': true as const, 'aria-describedby': `${id}-error` } : {}
}

export function NumberField({
  id,
  label,
  help,
  value,
  onChange,
  error,
  placeholder,
}: {
  id: string
  label: string
  help: ReactNode
  value: string
  onChange: (v: string) => void
  error?: string | null
  placeholder?: string
}) {
  return (
    <div>
      <label htmlFor={id} className="label flex items-center gap-1.5">{label} <InfoTip label={`About ${label}`}>{help}</InfoTip></label>
      <input
        id={id}
        className={`input font-mono ${error ? 'border-bad/70 focus:border-bad' : ''}`}
        inputMode="decimal"
        value={value}
        placeholder={placeholder}
        onChange={(e) => onChange(e.target.value)}
        {...invalidProps(id, error)}
      />
      <FieldError id={id} error={error} />
    </div>
  )
}

/** A field of the new-job form. Empty means "the server's proposal" (shown as placeholder). */
export function ParamField({
  spec,
  value,
  onChange,
  id,
  error,
  proposed,
}: {
  spec: ParamSpec
  value: string
  onChange: (v: string) => void
  id: string
  error?: string | null
  /** What the server would use if the field stays empty. */
  proposed?: unknown
}) {
  const shown = proposed === undefined || proposed === null ? null : String(proposed)
  const help = <>{spec.help} Empty: {shown === null ? 'the server proposes it from your data' : `the server's proposal, ${shown}`}.</>
  if (spec.type === 'select') {
    return (
      <div>
        <label htmlFor={id} className="label flex items-center gap-1.5">
          {spec.label} <InfoTip label={`About ${spec.label}`}>{help}</InfoTip>
        </label>
        <select id={id} className="input" value={value} onChange={(e) => onChange(e.target.value)} {...invalidProps(id, error)}>
          <option value="">{shown === null ? 'proposed by the server' : `proposed: ${shown}`}</option>
          {spec.options?.map((o) => <option key={o}>{o}</option>)}
        </select>
        <FieldError id={id} error={error} />
      </div>
    )
  }
  return (
    <NumberField id={id} label={spec.label} help={help} value={value} onChange={onChange} error={error}
      placeholder={shown === null ? 'proposed by the server' : `proposed: ${shown}`} />
  )
}

const KIND_LABEL: Record<BaseModelOption['kind'], string> = { builtin: 'built-in', cached: 'downloaded', library: 'your library' }

/** Free text with suggestions: a hub id, a server directory, a built-in or a library model. */
export function BaseModelField({
  id,
  value,
  onChange,
  options,
  error,
  placeholder = 'e.g. Qwen/Qwen3-0.6B',
}: {
  id: string
  value: string
  onChange: (v: string) => void
  options: readonly BaseModelOption[]
  error?: string | null
  placeholder?: string
}) {
  const chosen = options.find((o) => o.id === value.trim())
  return (
    <div>
      <label htmlFor={id} className="label">Base model</label>
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
        <p className="mt-1 text-xs text-accent">Continues from {chosen.label}{chosen.detail ? ` (${chosen.detail})` : ''}.</p>
      )}
      <p id={`${id}-help`} className="mt-1 text-xs text-neutral-500">
        A Hugging Face hub id (<code className="text-neutral-400">Qwen/Qwen3-0.6B</code>), a model directory on the server,
        a built-in (<code className="text-neutral-400">thinker/tiny</code> trains in seconds on a CPU), or a model from your
        library (<code className="text-neutral-400">mdl_…</code>) to continue training it. Suggestions list what this server has.
      </p>
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
