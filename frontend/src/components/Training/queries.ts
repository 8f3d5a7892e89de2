// Server state of the Training view. Cache keys line up with the shared live hooks:
// ['job', id] and ['job-metrics', id] are patched by useJobEvents; anything under ['jobs'] is
// invalidated by useJobListEvents and by checkpoint/state events, which is why a job's
// checkpoints and rollouts live under ['jobs', id, ...].
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useState } from 'react'
import { api, unwrap, type Schemas } from '../../api/client'
import type { operations } from '../../api/schema'
import { isLive, type JobState } from '../../api/vocabulary'
import type { HistoryEvent } from './attempts'
import { problemsOf, unwrapProblems, type ProposalRequest } from './contract'
import type { EvaluationQuery } from './evaluation'

export type Job = Schemas['JobPublic']
export type MetricsPage = Schemas['MetricsPage']

export function useJobs(state: JobState | 'all') {
  return useQuery({
    queryKey: ['jobs', 'list', state],
    queryFn: async () =>
      unwrap(
        await api.GET('/api/jobs', {
          params: { query: { limit: 200, ...(state === 'all' ? {} : { state }) } },
        }),
      ),
    // Steps and ETA change without a state event, so poll while something is training.
    refetchInterval: (q) => (q.state.data?.data.some((j) => isLive(j.state)) ? 3_000 : false),
  })
}

export function useJob(jobId: string, enabled = true) {
  return useQuery({
    queryKey: ['job', jobId],
    enabled,
    queryFn: async () => unwrap(await api.GET('/api/jobs/{job_id}', { params: { path: { job_id: jobId } } })),
    // ETA is computed by the server; refresh it now and then, the socket does the rest.
    refetchInterval: (q) => (isLive(q.state.data?.state) ? 5_000 : false),
  })
}

/** Every metrics row, all pages merged into one page (the shape useJobEvents appends to). */
export async function fetchAllMetrics(jobId: string): Promise<MetricsPage> {
  const data: MetricsPage['data'] = []
  let offset: number | null = 0
  while (offset !== null) {
    const page: MetricsPage = unwrap(
      await api.GET('/api/jobs/{job_id}/metrics', {
        params: { path: { job_id: jobId }, query: { offset, limit: 1000 } },
      }),
    )
    data.push(...page.data)
    offset = page.next_offset ?? null
    if (page.data.length === 0) break
  }
  return { data, count: data.length, next_offset: null }
}

/** `poll` for pages without a socket (the job list); the job page gets live events instead. */
export function useJobMetrics(jobId: string, poll = false) {
  return useQuery({
    queryKey: ['job-metrics', jobId],
    queryFn: () => fetchAllMetrics(jobId),
    refetchInterval: poll ? 4_000 : false,
    staleTime: poll ? 2_000 : Infinity,
  })
}

export function useJobLogs(jobId: string) {
  return useQuery({
    queryKey: ['job-logs', jobId],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs/{job_id}/logs', { params: { path: { job_id: jobId }, query: { tail: 200 } } })),
    staleTime: Infinity,
  })
}

/** A job's state and placement events (its attempts), and the last seq read. */
export interface JobHistory {
  events: HistoryEvent[]
  lastSeq: number
}

const HISTORY_TYPES = new Set(['state', 'placement'])
const EVENTS_PAGE = 10_000

/** The state and placement events after `held`'s: GET /events returns every event (metrics
 * and log lines too), so only what is new is asked for, and only these two kinds are kept. */
export async function fetchJobHistory(jobId: string, held?: JobHistory): Promise<JobHistory> {
  const events = [...(held?.events ?? [])]
  let after = held?.lastSeq ?? 0
  for (;;) {
    const page = unwrap(
      await api.GET('/api/jobs/{job_id}/events', {
        params: { path: { job_id: jobId }, query: { after_seq: after, limit: EVENTS_PAGE } },
      }),
    )
    const rows = page.data as unknown as HistoryEvent[]
    events.push(...rows.filter((e) => HISTORY_TYPES.has(e.type)))
    const last = rows.at(-1)?.seq ?? after
    // A short page is the end: everything up to the job's last_seq when it was read.
    if (rows.length < EVENTS_PAGE || last >= page.last_seq) return { events, lastSeq: Math.max(after, page.last_seq) }
    after = last
  }
}

/** The job's history of attempts, read only when `enabled` (see mayHaveAttempts). Under
 * ['jobs', id]: each state event refetches it (useJobEvents), which reads only what is new. */
export function useJobHistory(jobId: string, enabled: boolean) {
  const client = useQueryClient()
  const key = ['jobs', jobId, 'history']
  return useQuery({
    queryKey: key,
    enabled,
    queryFn: () => fetchJobHistory(jobId, client.getQueryData<JobHistory>(key)),
  })
}

export function useCheckpoints(jobId: string) {
  return useQuery({
    queryKey: ['jobs', jobId, 'checkpoints'],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs/{job_id}/checkpoints', { params: { path: { job_id: jobId } } })),
  })
}

export function useJobModels(jobId: string) {
  return useQuery({
    queryKey: ['models', 'job', jobId],
    queryFn: async () => unwrap(await api.GET('/api/models', { params: { query: { job_id: jobId, limit: 500 } } })),
  })
}

/** One step's rollouts (the latest for `step` null, refreshed while the job runs); the step on
 * screen is kept while the next loads, so the inspector keeps its filter and colour mode. */
export function useRollouts(jobId: string, step: number | null, live: boolean) {
  return useQuery({
    queryKey: ['jobs', jobId, 'rollouts', step],
    queryFn: async () =>
      unwrap(
        await api.GET('/api/jobs/{job_id}/rollouts', {
          params: { path: { job_id: jobId }, query: step === null ? {} : { step } },
        }),
      ),
    placeholderData: keepPreviousData,
    refetchInterval: live && step === null ? 5_000 : false,
  })
}

export type ResultsQuery = NonNullable<operations['read_job_results']['parameters']['query']>

/** A batch job's results, one page; polled while the job runs (each shard adds rows, and the
 * pool's actors change state), the page on screen kept while the next loads. */
export function useJobResults(jobId: string, query: ResultsQuery, live: boolean) {
  return useQuery({
    queryKey: ['jobs', jobId, 'results', query],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs/{job_id}/results', { params: { path: { job_id: jobId }, query } })),
    placeholderData: keepPreviousData,
    refetchInterval: live ? 5_000 : false,
  })
}

/** An eval job's evaluation (its summary, null until the job succeeded) and one page of its
 * prompts; polled while the job runs, the page on screen kept while the next loads. The job's
 * state events refetch it (under ['jobs']), so the summary arrives when the job ends. */
export function useJobEvaluation(jobId: string, query: EvaluationQuery, live: boolean) {
  return useQuery({
    queryKey: ['jobs', jobId, 'evaluation', query],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs/{job_id}/evaluation', { params: { path: { job_id: jobId }, query } })),
    placeholderData: keepPreviousData,
    refetchInterval: live ? 5_000 : false,
  })
}

export function useDatasets() {
  return useQuery({
    queryKey: ['datasets'],
    queryFn: async () => unwrap(await api.GET('/api/datasets', { params: { query: { limit: 500 } } })),
  })
}

/** Suggestions for the base-model field: built-ins, cached hub models, library models. */
export function useBaseModels() {
  return useQuery({
    queryKey: ['base-models'],
    queryFn: async () => unwrap(await api.GET('/api/base-models')).data,
    staleTime: 60_000,
  })
}

/** The server's proposal for a job; the previous one stays on screen while the next loads. */
export function useProposal(request: ProposalRequest | null) {
  return useQuery({
    queryKey: ['job-proposal', request],
    enabled: request !== null,
    queryFn: async () => unwrapProblems(await api.POST('/api/jobs/proposal', { body: request as ProposalRequest })),
    placeholderData: keepPreviousData,
    staleTime: 30_000,
  })
}

/** `value`, once it has stopped changing for `ms` (typing in a field asks the server once).
 * Compared by content: a new object with the same JSON is not a change. */
export function useDebounced<T>(value: T, ms = 350): T {
  const key = JSON.stringify(value)
  const [settled, setSettled] = useState(key)
  useEffect(() => {
    const timer = setTimeout(() => setSettled(key), ms)
    return () => clearTimeout(timer)
  }, [key, ms])
  return settled === key ? value : (JSON.parse(settled) as T)
}

export type JobAction = 'pause' | 'resume' | 'cancel'

export function useJobAction(jobId: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async (action: JobAction) => {
      const opts = { params: { path: { job_id: jobId } } }
      const result =
        action === 'pause'
          ? await api.POST('/api/jobs/{job_id}/pause', opts)
          : action === 'resume'
            ? await api.POST('/api/jobs/{job_id}/resume', opts)
            : await api.POST('/api/jobs/{job_id}/cancel', opts)
      return unwrap(result)
    },
    onSuccess: (job) => {
      client.setQueryData(['job', jobId], job)
      client.invalidateQueries({ queryKey: ['jobs'] })
    },
  })
}

/** A refused job: the server's `problems`, one per field. */
export interface CreateJobError extends Error {
  problems: string[]
}

export function useCreateJob() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async (body: Schemas['JobCreate']) => {
      const result = await api.POST('/api/jobs', {
        body,
        // One key per submit: a double click or a retry cannot queue the job twice.
        params: { header: { 'idempotency-key': crypto.randomUUID() } },
      })
      if (result.error !== undefined) {
        const err = new Error(errorDetail(result.error)) as CreateJobError
        err.problems = problemsOf(result.error)
        throw err
      }
      return unwrap(result)
    },
    onSuccess: (job) => {
      client.setQueryData(['job', job.id], job)
      client.invalidateQueries({ queryKey: ['jobs'] })
    },
  })
}

function errorDetail(body: unknown): string {
  const detail = (body as { detail?: unknown } | null)?.detail
  return typeof detail === 'string' ? detail : 'the server refused the job'
}
