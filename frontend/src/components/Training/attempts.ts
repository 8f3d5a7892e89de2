// A job's attempts, from its event history: each `starting` state event opens one (with its
// number), its `placement` event says where its worker ran, the next ending state event
// (interrupted, paused, failed, succeeded, cancelled) closes it, and a `queued` event with
// `resumed` says how the next one came: by itself (`auto`: the server's auto_resume) or
// because a person pressed Resume. Pure: the job page feeds it GET /events and live events.
import type { JobState } from '../../api/vocabulary'
import type { Job } from './queries'

/** One event of the job's history (GET /api/jobs/{id}/events, the Socket.IO stream). */
export interface HistoryEvent {
  seq: number
  time: number
  type: string
  data: Record<string, unknown>
}

/** Where an attempt's worker runs (JobPublic.placement, a `placement` event). */
export interface Placement {
  executor: string
  hostname?: string
  node_ip?: string
  node_id?: string
  gpus: string[]
  /** The processes that train the job data-parallel (a job of gpus > 1); absent: one. */
  processes?: number
}

export type EndState = Extract<JobState, 'interrupted' | 'paused' | 'failed' | 'succeeded' | 'cancelled'>
const END_STATES: readonly string[] = ['interrupted', 'paused', 'failed', 'succeeded', 'cancelled'] satisfies EndState[]

/** How the job was queued again after an attempt ended: by the server (its auto_resume
 * retries, after what) or by a person (Resume). */
export type Resumed = { kind: 'auto'; retry: number; of: number; after: string | null } | { kind: 'person' }

export interface Attempt {
  attempt: number
  /** When it was launched (seconds since the epoch; null when no `starting` event opened it). */
  startedAt: number | null
  /** The device the server gave it ("cuda:0"; null: CPU or none recorded). */
  device: string | null
  placement: Placement | null
  /** How it ended; null while it runs (or starts). */
  end: { state: EndState; reason: string | null; logTail: string | null; time: number } | null
  /** How the next attempt came (null: none did, or not yet). */
  resumed: Resumed | null
  /** The job was cancelled after this attempt ended (while interrupted, paused or queued again). */
  cancelledAfter: boolean
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined)

/** A placement as the server sends it, or null when `raw` is none (or not one). */
export function parsePlacement(raw: unknown): Placement | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null
  const r = raw as Record<string, unknown>
  const executor = str(r.executor)
  if (!executor) return null
  const gpus = Array.isArray(r.gpus) ? r.gpus.filter((g) => typeof g === 'string' || typeof g === 'number').map(String) : []
  const p: Placement = { executor, gpus }
  for (const key of ['hostname', 'node_ip', 'node_id'] as const) {
    const v = str(r[key])
    if (v) p[key] = v
  }
  const processes = num(r.processes)
  if (processes !== undefined) p.processes = processes
  return p
}

const gpuText = (gpus: readonly string[]) => (gpus.length === 0 ? 'CPU' : `${gpus.length === 1 ? 'GPU' : 'GPUs'} ${gpus.join(',')}`)

/** "node 10.0.0.5 (host-b) · GPUs 0,1 · Ray", "local · CPU", "local · GPUs 0,1 · 2 processes". */
export function placementText(p: Placement): string {
  const processes = p.processes !== undefined && p.processes > 1 ? ` · ${p.processes} processes` : ''
  if (p.executor === 'local') return `local · ${gpuText(p.gpus)}${processes}`
  const host = p.node_ip ? `node ${p.node_ip}${p.hostname ? ` (${p.hostname})` : ''}` : p.hostname ? `node ${p.hostname}` : null
  const executor = p.executor === 'ray' ? 'Ray' : p.executor
  return [host, gpuText(p.gpus), executor].filter(Boolean).join(' · ') + processes
}

/** The details the short text leaves out (host, Ray node id), for a tooltip. */
export function placementTitle(p: Placement): string | undefined {
  return [p.hostname && `host ${p.hostname}`, p.node_id && `node id ${p.node_id}`].filter(Boolean).join(', ') || undefined
}

/** What followed an ended attempt: "resumed automatically, retry 1 of 2", "resumed by a
 * person", "cancelled" (or both: "resumed by a person, then cancelled"); null: nothing yet. */
export function afterText(a: Pick<Attempt, 'resumed' | 'cancelledAfter'>): string | null {
  const resumed = !a.resumed ? null : a.resumed.kind === 'auto' ? `resumed automatically, retry ${a.resumed.retry} of ${a.resumed.of}` : 'resumed by a person'
  if (!a.cancelledAfter) return resumed
  return resumed ? `${resumed}, then cancelled` : 'cancelled'
}

/** Each attempt, in order, from the job's events (any order, other types ignored). Events
 * written before attempts were numbered count their `starting` events instead. */
export function attemptsFromEvents(events: readonly HistoryEvent[]): Attempt[] {
  const attempts: Attempt[] = []
  const open = (attempt: number, startedAt: number | null, device: string | null): Attempt => {
    const a: Attempt = { attempt, startedAt, device, placement: null, end: null, resumed: null, cancelledAfter: false }
    attempts.push(a)
    return a
  }
  const last = () => attempts.at(-1)
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    const d = e.data
    if (e.type === 'placement') {
      const n = num(d.attempt)
      const target = (n !== undefined ? attempts.find((a) => a.attempt === n) : undefined) ?? last() ?? open(n ?? 1, null, null)
      target.placement = parsePlacement(d)
      continue
    }
    if (e.type !== 'state') continue
    const state = str(d.state)
    if (state === 'starting') {
      open(num(d.attempt) ?? (last()?.attempt ?? 0) + 1, e.time, str(d.device) ?? null)
    } else if (state === 'queued' && d.resumed === true) {
      const a = last()
      if (!a) continue
      const auto = typeof d.auto === 'object' && d.auto !== null ? (d.auto as Record<string, unknown>) : null
      a.resumed = auto ? { kind: 'auto', retry: num(auto.retry) ?? 0, of: num(auto.of) ?? 0, after: str(auto.after) ?? null } : { kind: 'person' }
    } else if (state && END_STATES.includes(state)) {
      // An ended attempt: the first end is how it ended; a later cancel (of the interrupted or
      // paused job, or while it waited again) is what came after.
      const a = last() ?? open(1, null, null)
      if (!a.end) {
        const reason = state === 'interrupted' || state === 'failed' ? (str(d.reason) ?? null) : null
        a.end = { state: state as EndState, reason, logTail: str(d.log_tail) ?? null, time: e.time }
      } else if (state === 'cancelled') {
        a.cancelledAfter = true
      }
    }
  }
  return attempts
}

/** Whether the page shows the attempts: more than one, or any interrupted. */
export function showAttempts(attempts: readonly Attempt[]): boolean {
  return attempts.length > 1 || attempts.some((a) => a.end?.state === 'interrupted')
}

/** Whether the job's history may hold more than one attempt or an interruption: only then is
 * it read (GET /events returns every event, metrics and log lines included). A job with one
 * attempt that ran on undisturbed (running, succeeded, failed) has none to show. */
export function mayHaveAttempts(job: Pick<Job, 'attempts' | 'auto_resumes' | 'state'>): boolean {
  if (job.attempts > 1 || job.auto_resumes > 0) return true
  // queued, paused or cancelled after it ran: it may have been interrupted and resumed.
  return job.attempts >= 1 && ['interrupted', 'queued', 'paused', 'cancelled'].includes(job.state)
}

/** "used 1 of 2" (of the job's auto-resume retries; "off" when it has none). */
export function autoResumeUse(job: Pick<Job, 'auto_resume' | 'auto_resumes'>): string {
  return job.auto_resume > 0 ? `used ${job.auto_resumes} of ${job.auto_resume}` : 'off'
}

/** "auto-resume: used 1 of 2". */
export const autoResumeText = (job: Pick<Job, 'auto_resume' | 'auto_resumes'>): string => `auto-resume: ${autoResumeUse(job)}`
