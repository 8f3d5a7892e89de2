// The field mapping as editable rows: canonical field ← source expression. Rows are kept
// as a list (not an object) so a half-typed row keeps its place while the user edits it.
import type { MappingRow } from './mapping'

const CANONICAL = ['messages', 'prompt', 'completion', 'system', 'chosen', 'rejected', 'answer', 'tests']

interface Props {
  rows: MappingRow[]
  fields: string[]
  onChange: (rows: MappingRow[]) => void
  /** What an empty mapping means where the editor is used. */
  emptyText?: string
}

export function MappingEditor({ rows, fields, onChange, emptyText = 'The fields are used as they are named. Add a row to rename one.' }: Props) {
  const update = (i: number, patch: Partial<MappingRow>) =>
    onChange(rows.map((row, j) => (j === i ? { ...row, ...patch } : row)))
  return (
    <div className="flex flex-col gap-2" aria-label="field mapping">
      {rows.length === 0 && (
        <p className="text-sm text-neutral-400">{emptyText}</p>
      )}
      {rows.map((row, i) => (
        <div key={i} className="grid grid-cols-[10rem_auto_1fr_auto] items-center gap-2">
          <input
            className="input font-mono"
            aria-label={`canonical field ${i + 1}`}
            list="canonical-fields"
            value={row.canonical}
            onChange={(e) => update(i, { canonical: e.target.value })}
          />
          <span className="text-accent" aria-hidden>←</span>
          <input
            className="input font-mono"
            aria-label={`source for ${row.canonical || `row ${i + 1}`}`}
            list="source-fields"
            value={row.source}
            placeholder="field, a+b, sharegpt:field, transcript:field…"
            onChange={(e) => update(i, { source: e.target.value })}
          />
          <button
            type="button"
            className="btn-ghost px-2 py-1"
            aria-label={`remove ${row.canonical || 'row'}`}
            onClick={() => onChange(rows.filter((_, j) => j !== i))}
          >
            ✕
          </button>
        </div>
      ))}
      <button
        type="button"
        className="self-start text-sm text-accent hover:underline"
        onClick={() => onChange([...rows, { canonical: '', source: '' }])}
      >
        + add a field
      </button>
      <datalist id="canonical-fields">
        {CANONICAL.map((f) => <option key={f} value={f} />)}
      </datalist>
      <datalist id="source-fields">
        {fields.map((f) => <option key={f} value={f} />)}
      </datalist>
    </div>
  )
}
