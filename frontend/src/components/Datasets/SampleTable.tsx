// The first rows of the file as read, so the user sees what each source field holds
// before mapping it.
const MAX_CELL = 120

function cell(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  if (text === undefined) return ''
  return text.length > MAX_CELL ? `${text.slice(0, MAX_CELL)}…` : text
}

export function SampleTable({ fields, rows }: { fields: string[]; rows: Record<string, unknown>[] }) {
  if (rows.length === 0) return null
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            {fields.map((f) => <th key={f} className="px-3 py-2 font-mono normal-case">{f}</th>)}
          </tr>
        </thead>
        <tbody>
          {rows.slice(0, 5).map((row, i) => (
            <tr key={i} className="border-t border-ink-700 align-top">
              {fields.map((f) => (
                <td key={f} className="max-w-xs whitespace-pre-wrap break-words px-3 py-2 font-mono text-neutral-300">
                  {cell(row[f])}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
