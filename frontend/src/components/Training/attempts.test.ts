import { describe, expect, test } from 'vitest'
import { afterText, attemptsFromEvents, autoResumeText, mayHaveAttempts, parsePlacement, placementText, showAttempts, type HistoryEvent } from './attempts'

let seq = 0
const ev = (type: string, data: Record<string, unknown>): HistoryEvent => ({ seq: ++seq, time: 1000 + seq, type, data })
const state = (s: string, data: Record<string, unknown> = {}) => ev('state', { state: s, ...data })

const RAY_B = { executor: 'ray', hostname: 'host-b', node_ip: '10.0.0.5', node_id: 'abc123', gpus: ['0', '1'] }
const RAY_C = { executor: 'ray', hostname: 'host-c', node_ip: '10.0.0.6', node_id: 'def456', gpus: ['3'] }

describe('attemptsFromEvents', () => {
  test('a node lost, resumed by itself, then by a person: each attempt, where it ran and how it ended', () => {
    const events = [
      state('queued'),
      state('starting', { device: 'cuda:0', attempt: 1 }),
      ev('placement', { ...RAY_B, attempt: 1 }),
      state('running'),
      ev('metrics', { step: 1, metrics: { loss: 1 } }),
      ev('log', { line: 'step 1' }),
      state('interrupted', { reason: 'the node 10.0.0.5 was lost', log_tail: 'step 1' }),
      state('queued', { resumed: true, auto: { retry: 1, of: 2, after: 'the node 10.0.0.5 was lost' } }),
      state('starting', { device: 'cuda:0', attempt: 2 }),
      ev('placement', { ...RAY_C, attempt: 2 }),
      state('running'),
      state('failed', { reason: 'CUDA out of memory', retryable: true }),
      state('queued', { resumed: true }),
      state('starting', { device: 'cuda:0', attempt: 3 }),
      ev('placement', { ...RAY_C, attempt: 3 }),
      state('running'),
    ]
    const attempts = attemptsFromEvents(events)
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3])
    const [first, second, third] = attempts
    expect(first).toMatchObject({
      device: 'cuda:0',
      placement: RAY_B,
      end: { state: 'interrupted', reason: 'the node 10.0.0.5 was lost', logTail: 'step 1' },
      resumed: { kind: 'auto', retry: 1, of: 2, after: 'the node 10.0.0.5 was lost' },
      cancelledAfter: false,
    })
    expect(first.startedAt).toBe(events[1].time)
    expect(second).toMatchObject({ placement: RAY_C, end: { state: 'failed', reason: 'CUDA out of memory' }, resumed: { kind: 'person' } })
    expect(third).toMatchObject({ placement: RAY_C, end: null, resumed: null })
    expect(attempts.map(afterText)).toEqual(['resumed automatically, retry 1 of 2', 'resumed by a person', null])
    expect(showAttempts(attempts)).toBe(true)
  })

  test('one undisturbed attempt is not shown; one interrupted attempt is', () => {
    const done = attemptsFromEvents([state('queued'), state('starting', { device: null, attempt: 1 }), state('running'), state('succeeded')])
    expect(done).toHaveLength(1)
    expect(done[0].end).toMatchObject({ state: 'succeeded', reason: null })
    expect(showAttempts(done)).toBe(false)

    const lost = attemptsFromEvents([state('starting', { attempt: 1 }), state('interrupted', { reason: 'the worker exited' })])
    expect(showAttempts(lost)).toBe(true)
    expect(lost[0].end?.reason).toBe('the worker exited')
  })

  test('a cancel after an attempt ended is what came after it, not how it ended', () => {
    const attempts = attemptsFromEvents([
      state('starting', { attempt: 1 }),
      state('interrupted', { reason: 'lost' }),
      state('queued', { resumed: true, auto: { retry: 1, of: 1, after: 'lost' } }),
      state('cancelled'),
    ])
    expect(attempts).toHaveLength(1)
    expect(attempts[0].end?.state).toBe('interrupted')
    expect(afterText(attempts[0])).toBe('resumed automatically, retry 1 of 1, then cancelled')
  })

  test('a paused attempt keeps no reason; events out of order are sorted by seq', () => {
    const [a, b] = [state('starting', { attempt: 1 }), state('paused', { reason: 'asked' })]
    const attempts = attemptsFromEvents([b, a])
    expect(attempts[0].end).toMatchObject({ state: 'paused', reason: null })
  })

  test('older events without attempt numbers count their starts; a placement goes to the latest', () => {
    const attempts = attemptsFromEvents([
      state('starting', { device: 'cuda:1' }),
      state('interrupted', { reason: 'worker lost' }),
      state('queued', { resumed: true }),
      state('starting', { device: 'cuda:1' }),
      ev('placement', { executor: 'local', hostname: 'box', gpus: ['1'] }),
    ])
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2])
    expect(attempts[0].placement).toBeNull()
    expect(attempts[1].placement).toEqual({ executor: 'local', hostname: 'box', gpus: ['1'] })
  })

  test('no events, no attempts', () => {
    expect(attemptsFromEvents([])).toEqual([])
    expect(showAttempts([])).toBe(false)
  })
})

describe('placement', () => {
  test('in words: node, GPUs, executor', () => {
    expect(placementText(RAY_B)).toBe('node 10.0.0.5 (host-b) · GPUs 0,1 · Ray')
    expect(placementText(RAY_C)).toBe('node 10.0.0.6 (host-c) · GPU 3 · Ray')
    expect(placementText({ executor: 'ray', hostname: 'host-d', gpus: [] })).toBe('node host-d · CPU · Ray')
    expect(placementText({ executor: 'local', hostname: 'box', gpus: [] })).toBe('local · CPU')
    expect(placementText({ executor: 'local', gpus: ['0'] })).toBe('local · GPU 0')
  })

  test('a data-parallel job: its processes, when more than one', () => {
    expect(placementText({ executor: 'local', gpus: ['0', '1'], processes: 2 })).toBe('local · GPUs 0,1 · 2 processes')
    expect(placementText({ executor: 'local', gpus: [], processes: 4 })).toBe('local · CPU · 4 processes')
    expect(placementText({ ...RAY_B, processes: 2 })).toBe('node 10.0.0.5 (host-b) · GPUs 0,1 · Ray · 2 processes')
    expect(placementText({ executor: 'local', gpus: ['0'], processes: 1 })).toBe('local · GPU 0')
    expect(parsePlacement({ executor: 'local', gpus: [0, 1], processes: 2, attempt: 1 })).toEqual({ executor: 'local', gpus: ['0', '1'], processes: 2 })
    expect(parsePlacement({ executor: 'local', gpus: [], processes: 'two' })).toEqual({ executor: 'local', gpus: [] })
  })

  test('parsed from what the server sends; anything else is none', () => {
    expect(parsePlacement({ executor: 'ray', node_ip: '10.0.0.5', gpus: [0, 1], attempt: 2 })).toEqual({ executor: 'ray', node_ip: '10.0.0.5', gpus: ['0', '1'] })
    expect(parsePlacement(null)).toBeNull()
    expect(parsePlacement({ gpus: [] })).toBeNull()
    expect(parsePlacement('ray')).toBeNull()
  })
})

describe('the job fields', () => {
  test('the history is read only where it may hold more than one attempt', () => {
    const j = (state: string, attempts: number, auto_resumes = 0) => ({ state, attempts, auto_resumes }) as Parameters<typeof mayHaveAttempts>[0]
    expect(mayHaveAttempts(j('running', 1))).toBe(false)
    expect(mayHaveAttempts(j('succeeded', 1))).toBe(false)
    expect(mayHaveAttempts(j('queued', 0))).toBe(false)
    expect(mayHaveAttempts(j('running', 2))).toBe(true)
    expect(mayHaveAttempts(j('queued', 1, 1))).toBe(true)
    expect(mayHaveAttempts(j('interrupted', 1))).toBe(true)
    expect(mayHaveAttempts(j('cancelled', 1))).toBe(true)
  })

  test('auto-resume in words', () => {
    expect(autoResumeText({ auto_resume: 2, auto_resumes: 1 })).toBe('auto-resume: used 1 of 2')
    expect(autoResumeText({ auto_resume: 0, auto_resumes: 0 })).toBe('auto-resume: off')
  })
})
