// The live stream of one job: joins its room with the last sequence number seen (so a
// reconnect gets only what it missed), and feeds the query cache: the job, its metrics and
// its log lines update as events arrive.
import { useQueryClient } from '@tanstack/react-query'
import { useEffect, useRef, useState } from 'react'
import type { Schemas } from '../api/client'
import { isActive, type JobState } from '../api/vocabulary'
import { getSocket } from './socket'

export interface JobEvent {
  job_id: string
  seq: number
  time: number
  type: string
  data: Record<string, unknown>
}

type Job = Schemas['JobPublic']
type MetricsPage = Schemas['MetricsPage']

export function applyJobEvent(job: Job | undefined, event: JobEvent): Job | undefined {
  if (!job) return job
  const next: Job = { ...job, last_seq: event.seq }
  const d = event.data
  if (event.type === 'state' && typeof d.state === 'string') {
    next.state = d.state as JobState
    if (typeof d.reason === 'string') next.reason = d.reason
    // Each attempt is placed anew: queued again or starting, the last placement is gone.
    if (next.state === 'queued' || next.state === 'starting') next.placement = null
    if (next.state === 'starting' && typeof d.attempt === 'number') next.attempts = d.attempt
    const auto = d.auto as { retry?: unknown } | undefined
    if (next.state === 'queued' && typeof auto?.retry === 'number') next.auto_resumes = auto.retry
    // as JobPublic computes it: resume helps a paused or interrupted job, and a failed one
    // unless its worker said the failure will repeat
    next.retryable = next.state === 'paused' || next.state === 'interrupted' || (next.state === 'failed' && d.retryable !== false)
    if (!isActive(next.state)) {
      next.stale = false
      next.heartbeat_age_s = null
    }
  } else if (event.type === 'placement' && typeof d.executor === 'string') {
    // where this attempt's worker was placed (the event also names the attempt)
    const { attempt: _attempt, ...placement } = d
    next.placement = placement
  } else if (event.type === 'heartbeat' && typeof d.stale === 'boolean') {
    // the server says the worker went silent past heartbeat_timeout_s, or beats again
    next.stale = d.stale
    if (typeof d.silent_s === 'number') next.heartbeat_age_s = d.silent_s
  } else if (event.type === 'report' && typeof d.verdict === 'string') {
    // written just before the final state: the page shows whether it learned without a reload
    next.report = d as Job['report']
  } else if (event.type === 'plan' && typeof d.total_steps === 'number') {
    // Each start (and each RLHF stage) plans its own steps, from where it resumes.
    next.total_steps = d.total_steps
    if (typeof d.start_step === 'number') next.step = d.start_step
  } else if (event.type === 'metrics' && typeof d.step === 'number') {
    next.step = d.step
  }
  if (next.total_steps) next.progress = next.step / next.total_steps
  return next
}

export function useJobEvents(jobId: string | undefined): { logs: string[]; connected: boolean } {
  const client = useQueryClient()
  const lastSeq = useRef(0)
  // Keyed by job: another job's lines are never shown (and need no reset in the effect).
  const [logs, setLogs] = useState<{ jobId: string | undefined; lines: string[] }>({ jobId, lines: [] })
  const [connected, setConnected] = useState(false)

  useEffect(() => {
    if (!jobId) return
    const socket = getSocket()
    // The page fetched the job and its metrics already; start the stream after what they hold.
    lastSeq.current = client.getQueryData<Job>(['job', jobId])?.last_seq ?? 0
    const join = () => {
      setConnected(true)
      // batch: the replay and each server tick's events come as one `job_events` list.
      socket.emit('join_job', { job_id: jobId, after_seq: lastSeq.current, batch: true })
    }
    const onEvent = (event: JobEvent) => {
      if (event.job_id !== jobId || event.seq <= lastSeq.current) return
      lastSeq.current = event.seq
      client.setQueryData<Job>(['job', jobId], (job) => applyJobEvent(job, event))
      if (event.type === 'metrics') {
        const stage = typeof event.data.stage === 'string' ? { stage: event.data.stage } : {}
        const row = {
          step: event.data.step,
          time: event.time,
          ...stage,
          ...(event.data.metrics as object),
        }
        client.setQueryData<MetricsPage>(['job-metrics', jobId], (page) => (page ? appendMetricsRow(page, row) : page))
      } else if (event.type === 'log' && typeof event.data.line === 'string') {
        const line = event.data.line
        setLogs((old) => ({ jobId, lines: [...(old.jobId === jobId ? old.lines : []).slice(-499), line] }))
      } else if (event.type === 'checkpoint' || event.type === 'state') {
        client.invalidateQueries({ queryKey: ['models'] })
        client.invalidateQueries({ queryKey: ['jobs'] })
      } else if (event.type === 'placement') {
        client.invalidateQueries({ queryKey: ['jobs', jobId, 'history'] })
      }
    }
    const onEvents = (events: JobEvent[]) => events.forEach(onEvent)
    const onDisconnect = () => setConnected(false)
    socket.on('connect', join)
    socket.on('disconnect', onDisconnect)
    socket.on('job_event', onEvent)
    socket.on('job_events', onEvents)
    if (socket.connected) join()
    return () => {
      socket.emit('leave_job', { job_id: jobId })
      socket.off('connect', join)
      socket.off('disconnect', onDisconnect)
      socket.off('job_event', onEvent)
      socket.off('job_events', onEvents)
    }
  }, [jobId, client])

  return { logs: logs.jobId === jobId ? logs.lines : [], connected }
}

/** Add a live metrics row. A resumed attempt trains again the steps after its checkpoint:
 * rows of the same stage at or after the new row's step are the earlier attempt's, and go
 * (as the server's `read_metrics` leaves them out). */
export function appendMetricsRow(page: MetricsPage, row: { step: unknown; stage?: string }): MetricsPage {
  const step = Number(row.step)
  const kept = page.data.filter((r) => (r as { stage?: string }).stage !== row.stage || Number((r as { step?: unknown }).step) < step)
  return { ...page, data: [...kept, row as MetricsPage['data'][number]], count: kept.length + 1 }
}
