// The issue-14 server API as this dashboard reads it: the proposal, base-model suggestions
// (generated types), and the job report, which the server sends as a plain mapping (typed
// here), with the error shape its 422s share. The settings' rules are in api/jobConfig.ts.
import { errorMessage, type Schemas } from '../../api/client'

export type { Stage } from '../../api/jobConfig'
export type ProposalRequest = Schemas['JobProposalRequest']
export type JobProposal = Schemas['JobProposal']
export type BaseModelOption = Schemas['BaseModelOption']

export interface ReportMetric {
  name: string
  label: string
  value: number | null
  base: number | null
  higher_is_better: boolean
}

export interface ReportWarning {
  code: string
  message: string
  cause: string
  fix: string
}

export interface ReportSample {
  prompt: string
  reference: string
  answer: string
  base_answer: string
}

export interface JobReport {
  verdict: 'learned' | 'not_learned' | 'unknown'
  /** Null when the report could not be computed (a `report_failed` warning says why). */
  metric: ReportMetric | null
  held_out: Record<string, number | null>
  base: Record<string, number | null>
  warnings: ReportWarning[]
  samples: ReportSample[]
}

/** The job's report, or null when there is none (or it is not one). */
export function reportOf(job: Pick<Schemas['JobPublic'], 'report'>): JobReport | null {
  const r = job.report as Partial<JobReport> | null | undefined
  if (!r || typeof r !== 'object' || !r.verdict) return null
  return { ...r, metric: r.metric ?? null, held_out: r.held_out ?? {}, base: r.base ?? {}, warnings: r.warnings ?? [], samples: r.samples ?? [] } as JobReport
}

/** A refused request: the server's `problems`, one per field. */
export interface ProblemsError extends Error {
  problems: string[]
  status: number
}

/** 422 bodies: {"detail": "invalid job", "problems": [...]} or FastAPI's validation list. */
export function problemsOf(body: unknown): string[] {
  const b = body as { problems?: unknown; detail?: unknown } | null
  if (Array.isArray(b?.problems)) return b.problems.map(String)
  if (Array.isArray(b?.detail)) {
    return b.detail.map((d: { loc?: unknown[]; msg?: string }) =>
      `${(d.loc ?? []).filter((x) => x !== 'body').join('.')}: ${d.msg ?? ''}`,
    )
  }
  return []
}

/** An openapi-fetch result's data, or throw a ProblemsError with the server's message. */
export function unwrapProblems<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) {
    const err = new Error(errorMessage(result.error ?? `HTTP ${result.response.status}`)) as ProblemsError
    err.problems = problemsOf(result.error)
    err.status = result.response.status
    throw err
  }
  return result.data
}

/** The problems about one field (`base_model`, `config.rl.batch_size`), without the prefix. */
export function problemsAbout(problems: readonly string[], field: string): string[] {
  return problems.filter((p) => p.startsWith(`${field}:`)).map((p) => p.slice(field.length + 1).trim())
}
