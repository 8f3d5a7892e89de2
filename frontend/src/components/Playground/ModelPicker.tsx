// A model select: base models first, then trained models labelled with their lineage.
import type { ModelOption } from './models'

interface Props {
  label: string
  value: string
  options: ModelOption[]
  onChange: (id: string) => void
  testId?: string
}

export function ModelPicker({ label, value, options, onChange, testId }: Props) {
  const base = options.filter((o) => o.builtin)
  const trained = options.filter((o) => !o.builtin)
  const current = options.find((o) => o.id === value)
  return (
    <label className="block">
      <span className="label">{label}</span>
      <select
        className="input"
        value={value}
        data-testid={testId}
        onChange={(e) => onChange(e.target.value)}
      >
        {/* A model from the URL that the server no longer serves stays visible, not silently swapped. */}
        {!current && value && <option value={value}>{value} (not served)</option>}
        <optgroup label="Base models">
          {base.map((o) => (
            <option key={o.id} value={o.id}>{o.label}</option>
          ))}
        </optgroup>
        {trained.length > 0 && (
          <optgroup label="Trained models">
            {trained.map((o) => (
              <option key={o.id} value={o.id}>{o.label}</option>
            ))}
          </optgroup>
        )}
      </select>
      {/* The select cuts long labels; the lineage is spelled out under it. */}
      {current?.model && (
        <span className="mt-1 block text-[11px] leading-4 text-neutral-500">
          {current.model.name}: {current.model.base_model} fine-tuned to step {current.model.step}
          {current.model.stage ? ` (${current.model.stage} stage)` : ''} · <span className="font-mono">{current.id}</span>
        </span>
      )}
    </label>
  )
}
