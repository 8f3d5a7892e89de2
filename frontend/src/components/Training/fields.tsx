// Form fields shared by the new-job form and the wizard.
import { Link } from 'react-router-dom'
import type { Schemas } from '../../api/client'
import type { DatasetKind, ParamSpec } from './algorithms'
import { InfoTip } from './ui'

type Dataset = Schemas['DatasetPublic']

export function ParamField({ spec, value, onChange, id }: { spec: ParamSpec; value: string; onChange: (v: string) => void; id: string }) {
  const placeholder = spec.default === null ? 'server default' : `default ${spec.default}`
  return (
    <div>
      <label htmlFor={id} className="label flex items-center gap-1.5">
        {spec.label} <InfoTip label={`About ${spec.label}`}>{spec.help} Server default: {spec.default === null ? 'derived' : String(spec.default)}.</InfoTip>
      </label>
      {spec.type === 'select' ? (
        <select id={id} className="input" value={value} onChange={(e) => onChange(e.target.value)}>
          {spec.options?.map((o) => <option key={o}>{o}</option>)}
        </select>
      ) : (
        <input id={id} className="input font-mono" inputMode="decimal" value={value} placeholder={placeholder} onChange={(e) => onChange(e.target.value)} />
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
