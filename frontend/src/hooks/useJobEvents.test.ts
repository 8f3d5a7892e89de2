import { describe, expect, test } from 'vitest'
import type { Schemas } from '../api/client'
import { appendMetricsRow, applyJobEvent, type JobEvent } from './useJobEvents'

const job = {
  id: 'job_1', name: 'j', algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny',
  dataset_id: 'ds_1', config: {}, state: 'starting', reason: null, log_tail: null, priority: 0,
  resource: 'cpu', device: null, step: 0, total_steps: null, progress: null, eta_s: null,
  attempts: 1, last_seq: 2, heartbeat_at: null, heartbeat_age_s: null, stale: false,
  created_at: '', started_at: null,
  finished_at: null, created_by: null, parent_model_id: null, retryable: false, report: null,
  gpus: 1, memory_gb: null, auto_resume: 2, auto_resumes: 0, placement: null,
} satisfies Schemas['JobPublic'] as Schemas['JobPublic']

const event = (seq: number, type: string, data: Record<string, unknown>): JobEvent => ({
  job_id: 'job_1', seq, time: 0, type, data,
})

describe('applyJobEvent', () => {
  test('state, plan and metrics events update the cached job', () => {
    let next = applyJobEvent(job, event(3, 'state', { state: 'running' }))
    next = applyJobEvent(next, event(4, 'plan', { total_steps: 10, start_step: 0 }))
    next = applyJobEvent(next, event(5, 'metrics', { step: 4, metrics: { loss: 1 } }))
    expect(next).toMatchObject({ state: 'running', total_steps: 10, step: 4, last_seq: 5 })
    expect(next?.progress).toBeCloseTo(0.4)
  })

  test('a failure keeps its reason', () => {
    const failed = applyJobEvent(job, event(3, 'state', { state: 'failed', reason: 'boom' }))
    expect(failed).toMatchObject({ state: 'failed', reason: 'boom' })
  })

  test('a new stage (or a resume) starts its own count of steps', () => {
    const rlhf = { ...job, step: 30, total_steps: 30 }
    const next = applyJobEvent(rlhf, event(3, 'plan', { total_steps: 20, start_step: 0 }))
    expect(next).toMatchObject({ step: 0, total_steps: 20, progress: 0 })
  })

  test('a heartbeat event marks the worker stale, and again live; an end clears it', () => {
    const running = { ...job, state: 'running' as const }
    let next = applyJobEvent(running, event(3, 'heartbeat', { stale: true, silent_s: 31.5 }))
    expect(next).toMatchObject({ stale: true, heartbeat_age_s: 31.5 })
    next = applyJobEvent(next, event(4, 'heartbeat', { stale: false, silent_s: 0.2 }))
    expect(next).toMatchObject({ stale: false, heartbeat_age_s: 0.2 })
    next = applyJobEvent(next, event(5, 'heartbeat', { stale: true, silent_s: 40 }))
    next = applyJobEvent(next, event(6, 'state', { state: 'interrupted', reason: 'no heartbeat' }))
    expect(next).toMatchObject({ state: 'interrupted', stale: false, heartbeat_age_s: null })
  })

  test('each attempt: its placement, a lost node, an automatic resume, the next start', () => {
    const where = { executor: 'ray', hostname: 'host-b', node_ip: '10.0.0.5', node_id: 'n1', gpus: ['0', '1'] }
    let next = applyJobEvent(job, event(3, 'placement', { ...where, attempt: 1 }))
    expect(next?.placement).toEqual(where)
    next = applyJobEvent(next, event(4, 'state', { state: 'interrupted', reason: 'node lost', log_tail: '' }))
    expect(next).toMatchObject({ state: 'interrupted', reason: 'node lost', placement: where })
    next = applyJobEvent(next, event(5, 'state', { state: 'queued', resumed: true, auto: { retry: 1, of: 2, after: 'node lost' } }))
    expect(next).toMatchObject({ state: 'queued', auto_resumes: 1, placement: null })
    next = applyJobEvent(next, event(6, 'state', { state: 'starting', device: 'cuda:0', attempt: 2 }))
    expect(next).toMatchObject({ state: 'starting', attempts: 2, auto_resumes: 1 })
    // a person's resume uses no retry
    next = applyJobEvent({ ...job, state: 'paused', auto_resumes: 1 }, event(7, 'state', { state: 'queued', resumed: true }))
    expect(next?.auto_resumes).toBe(1)
  })

  test('nothing to update without a cached job', () => {
    expect(applyJobEvent(undefined, event(3, 'state', { state: 'running' }))).toBeUndefined()
  })
})

describe('appendMetricsRow', () => {
  const page = (steps: number[], stage?: string) => ({
    data: steps.map((step) => ({ step, ...(stage ? { stage } : {}) })),
    count: steps.length,
    next_offset: null,
  })
  test('appends in order', () => {
    expect(appendMetricsRow(page([1, 2]), { step: 3 }).data.map((r) => r.step)).toEqual([1, 2, 3])
  })
  test('a resumed attempt replaces the steps it trains again', () => {
    const next = appendMetricsRow(page([1, 2, 3, 4]), { step: 3 })
    expect(next.data.map((r) => r.step)).toEqual([1, 2, 3])
    expect(next.count).toBe(3)
  })
  test('another stage is left alone', () => {
    expect(appendMetricsRow(page([1, 2, 3], 'sl'), { step: 1, stage: 'rl' }).data).toHaveLength(4)
  })
})

describe('applyJobEvent: the end of a job', () => {
  const event = (type: string, data: Record<string, unknown>, seq = 9) => ({ seq, time: 0, type, data }) as JobEvent
  test('the report arrives live, before the final state', () => {
    const report = { verdict: 'learned', metric: null, held_out: null, base: null, warnings: [], samples: [] }
    expect(applyJobEvent({ ...job, state: 'running' }, event('report', report))?.report).toEqual(report)
  })
  test('resume is offered only where it can help', () => {
    expect(applyJobEvent(job, event('state', { state: 'failed', retryable: false }))?.retryable).toBe(false)
    expect(applyJobEvent(job, event('state', { state: 'failed' }))?.retryable).toBe(true)
    expect(applyJobEvent(job, event('state', { state: 'paused' }))?.retryable).toBe(true)
    expect(applyJobEvent(job, event('state', { state: 'succeeded' }))?.retryable).toBe(false)
  })
})
