// What validation found: the totals, the problems by kind, and each problem with its line,
// so the user can fix the file (or make a version without those lines).
import type { Schemas } from '../../api/client'

type RowError = Schemas['ErrorPublic']

interface Props {
  rows?: number | null
  errorCount: number
  errorCounts: Record<string, number>
  errors: RowError[]
  /** What "line" counts in this format (lines of a file, or rows). */
  unit?: string
  /** False when no kind was detected or chosen: the rows were read but not checked. */
  kindKnown?: boolean
}

/** A hint for the most common problems: what the user can do about them. */
const FIX: Record<string, string> = {
  duplicate: 'remove the repeated row, or make a version without that line',
  missing: 'map a source field to it below, or add it to the row',
  empty: 'fill it in or drop the row',
  malformed_json: 'the line is not valid JSON: check quotes, commas and brackets',
  wrong_type: 'the value has the wrong shape (e.g. text where a list of messages is needed)',
  invalid_utf8: 'save the file as UTF-8',
  not_text: 'this is not a text file: upload JSONL, JSON, CSV or Parquet',
  too_long: 'split or shorten the row',
}

export function ValidationSummary({ rows, errorCount, errorCounts, errors, unit = 'line', kindKnown = true }: Props) {
  const ok = errorCount === 0
  // Rows of no known kind were only read: "no problems" would claim a check that did not run.
  const unchecked = ok && !kindKnown
  const led = unchecked ? 'bg-warn shadow-[0_0_8px_#f59e0b]' : ok ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-bad shadow-[0_0_8px_#ef4444]'
  return (
    <section aria-label="validation" className="flex flex-col gap-3">
      <div className="flex flex-wrap items-center gap-3 text-sm">
        <span className={`led ${led}`} />
        {rows != null && <span>{rows.toLocaleString()} rows read</span>}
        <span className={unchecked ? 'text-warn' : ok ? 'text-ok' : 'text-bad'}>
          {unchecked ? 'kind unknown: not checked' : ok ? 'no problems' : `${errorCount.toLocaleString()} problem${errorCount === 1 ? '' : 's'}`}
        </span>
        {Object.entries(errorCounts).map(([kind, count]) => (
          <span key={kind} className="rounded-full bg-bad/10 px-2 py-0.5 font-mono text-xs text-bad">
            {kind} × {count}
          </span>
        ))}
      </div>
      {unchecked && (
        <p className="text-sm text-neutral-400">
          No dataset kind fits these fields, so the rows could not be checked against one. Choose the kind in step 3 and map
          its fields (the suggestions help), then press <b>Check again with this mapping</b>.
        </p>
      )}
      {errors.length > 0 && <ErrorList errors={errors} unit={unit} total={errorCount} />}
    </section>
  )
}

function ErrorList({ errors, unit, total }: { errors: RowError[]; unit: string; total: number }) {
  return (
    <div className="max-h-80 overflow-y-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-sm">
        <thead className="sticky top-0 bg-ink-800 text-xs uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">{unit}</th>
            <th className="px-3 py-2">field</th>
            <th className="px-3 py-2">problem</th>
          </tr>
        </thead>
        <tbody>
          {errors.map((error, i) => (
            <tr key={i} className="border-t border-ink-700 align-top">
              <td className="px-3 py-2 font-mono text-bad" data-testid="error-line">
                {error.line === 0 ? 'file' : `${unit} ${error.line}`}
              </td>
              <td className="px-3 py-2 font-mono text-neutral-300">{error.field ?? '—'}</td>
              <td className="px-3 py-2">
                <div className="text-neutral-200">{error.message}</div>
                {FIX[error.kind] && <div className="text-xs text-neutral-500">fix: {FIX[error.kind]}</div>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {total > errors.length && (
        <p className="border-t border-ink-700 px-3 py-2 text-xs text-neutral-500">
          showing the first {errors.length} of {total.toLocaleString()}
        </p>
      )}
    </div>
  )
}
