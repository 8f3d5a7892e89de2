// A job report (written by the server when a job ends) in plain words: did it learn, by how
// much against the base model, and the short form the job list shows.
import type { JobReport, ReportMetric } from './contract'

/** 0.68, 12.4, 1234: two decimals for rates and losses, fewer for large values. */
export function formatMetric(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—'
  const a = Math.abs(v)
  return a >= 1000 ? v.toFixed(0) : a >= 100 ? v.toFixed(1) : v.toFixed(2)
}

/** "held-out exact match 0.68 vs 0.00 for the base model". */
export function comparison(m: ReportMetric): string {
  const value = `${m.label} ${formatMetric(m.value)}`
  return m.base === null || m.base === undefined ? `${value} (the base model was not measured)` : `${value} vs ${formatMetric(m.base)} for the base model`
}

/** The verdict as one sentence. */
export function verdictLine(report: JobReport): string {
  const m = report.metric
  if (!m || m.value === null) {
    return `Not measured: ${report.warnings[0]?.message ?? 'there was no held-out evaluation to compare with the base model.'}`
  }
  switch (report.verdict) {
    case 'learned':
      return `Learned: ${comparison(m)}`
    case 'not_learned':
      return `Did not learn: ${comparison(m)}`
    default:
      return `Unclear whether it learned: ${comparison(m)}`
  }
}

/** The job list's cell: "exact match 0.68 (base 0.00)". */
export function shortMetric(m: ReportMetric | null): string {
  if (!m || m.value === null) return 'not measured'
  const label = m.label.replace(/^held-out\s+/i, '')
  return `${label} ${formatMetric(m.value)}${m.base === null || m.base === undefined ? '' : ` (base ${formatMetric(m.base)})`}`
}
