import { act, cleanup, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { stepLines } from '../../components/Training/rollouts/testing'
import { answer, job, renderAt, report } from '../../components/Training/testing'
import { JobPage } from './JobPage'

const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

// The socket is network too: a fake connection that records handlers so the test can play
// the server's job_event messages, exactly as Socket.IO would deliver them.
const socket = vi.hoisted(() => {
  const handlers = new Map<string, ((payload: unknown) => void)[]>()
  return {
    connected: true,
    emitted: [] as [string, unknown][],
    on(event: string, fn: (payload: unknown) => void) {
      handlers.set(event, [...(handlers.get(event) ?? []), fn])
    },
    off(event: string, fn: (payload: unknown) => void) {
      handlers.set(event, (handlers.get(event) ?? []).filter((h) => h !== fn))
    },
    emit(event: string, payload: unknown) {
      this.emitted.push([event, payload])
    },
    disconnect() {},
    serverSends(event: string, payload: unknown) {
      for (const h of handlers.get(event) ?? []) h(payload)
    },
  }
})
vi.mock('socket.io-client', () => ({ io: () => socket }))

afterEach(() => {
  cleanup()
  fetchMock.mockReset()
})

const ev = (seq: number, type: string, data: Record<string, unknown>) => ({ job_id: 'job_1', seq, time: 1, type, data })

function serveJob(overrides: Record<string, unknown> = {}, models: unknown[] = [], events: unknown[] = []) {
  return answer(fetchMock, {
    'GET /api/jobs/job_1': () => ({ body: job(overrides) }),
    'GET /api/jobs/job_1/events': (q) => {
      const after = Number(q.get('after_seq') ?? 0)
      const data = (events as { seq: number }[]).filter((e) => e.seq > after)
      return { body: { data, last_seq: Math.max(after, ...data.map((e) => e.seq)) } }
    },
    'GET /api/jobs/job_1/metrics': () => ({
      body: { data: [{ step: 1, train_mean_nll: 5.9, learning_rate: 0.003 }, { step: 2, train_mean_nll: 4.1, learning_rate: 0.003 }], count: 2, next_offset: null },
    }),
    'GET /api/jobs/job_1/logs': () => ({ body: { lines: ['[thinker] plan: {"total_steps": 10}'], total_lines: 1 } }),
    'GET /api/jobs/job_1/checkpoints': () => ({ body: { data: [] } }),
    'GET /api/models': () => ({ body: { data: models, count: models.length } }),
    'GET /api/jobs/job_1/rollouts': () => ({ body: { steps: [1, 2], step: 2, data: stepLines() } }),
    'POST /api/jobs/job_1/cancel': () => ({ body: job({ ...overrides, state: 'cancelled' }) }),
  })
}

describe('job page', () => {
  test('a worker silent past the heartbeat timeout shows a stale badge, live', async () => {
    serveJob()
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    await screen.findByTestId('job-progress')
    expect(screen.queryByTestId('job-stale')).toBeNull()
    act(() => socket.serverSends('job_event', ev(6, 'heartbeat', { stale: true, silent_s: 42.3 })))
    expect(await screen.findByTestId('job-stale')).toHaveTextContent('stale — no heartbeat for 42 s')
    act(() => socket.serverSends('job_event', ev(7, 'heartbeat', { stale: false, silent_s: 0.4 })))
    await waitFor(() => expect(screen.queryByTestId('job-stale')).toBeNull())
    act(() => socket.serverSends('job_event', ev(8, 'heartbeat', { stale: true, silent_s: 31 })))
    expect(await screen.findByTestId('job-stale')).toHaveTextContent('31 s')
    act(() => socket.serverSends('job_event', ev(9, 'state', { state: 'interrupted', reason: 'the worker sent no heartbeat' })))
    await waitFor(() => expect(screen.queryByTestId('job-stale')).toBeNull())
  })

  test('joins the job room and applies live metrics, state and log events', async () => {
    serveJob()
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('latest-train_mean_nll')).toHaveTextContent('4.1')
    expect(socket.emitted).toContainEqual(['join_job', { job_id: 'job_1', after_seq: 0, batch: true }])
    expect(screen.getByTestId('job-progress')).toHaveTextContent('step 2 / 10')

    // A replayed row (step 2 again) must not duplicate; a new step updates chart and progress.
    // Joined with batch: true, a server tick's events come as one `job_events` list.
    act(() => {
      socket.serverSends('job_events', [
        ev(6, 'metrics', { step: 2, metrics: { train_mean_nll: 4.1, learning_rate: 0.003 } }),
        ev(7, 'metrics', { step: 3, metrics: { train_mean_nll: 9.5, learning_rate: 0.003 } }),
      ])
    })
    // The cache notifies React on the next tick, hence waitFor.
    await waitFor(() => expect(screen.getByTestId('latest-train_mean_nll')).toHaveTextContent('9.5'))
    expect(screen.getByTestId('job-progress')).toHaveTextContent('step 3 / 10')

    // The learning rate leaves its healthy range: the chart warns.
    act(() => socket.serverSends('job_event', ev(8, 'metrics', { step: 4, metrics: { train_mean_nll: 3, learning_rate: 0.5 } })))
    expect(await screen.findByText(/above 1e-2: very high/)).toBeInTheDocument()

    act(() => socket.serverSends('job_event', ev(9, 'log', { line: '[thinker] step 4: ok' })))
    act(() => socket.serverSends('job_event', ev(10, 'state', { state: 'succeeded' })))
    await waitFor(() => expect(screen.getByTestId('job-state')).toHaveTextContent('succeeded'))
    expect(screen.getByText(/Every checkpoint is now a model/)).toBeInTheDocument()

    await userEvent.click(screen.getByRole('tab', { name: 'Log' }))
    const log = await screen.findByTestId('log-tail')
    expect(log).toHaveTextContent('plan: {"total_steps": 10}')
    expect(log).toHaveTextContent('step 4: ok')
  })

  test('a failed job that may pass: its reason, its log tail, and Resume', async () => {
    serveJob({ state: 'failed', reason: 'worker lost', log_tail: 'Traceback: ...', retryable: true })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByText('This job failed')).toBeInTheDocument()
    expect(screen.getByText('worker lost')).toBeInTheDocument()
    expect(screen.getByText('Traceback: ...')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Resume' })).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'Cancel job' })).toBeNull()
  })

  test('a failed job that resuming cannot fix: no Resume, a new job from its settings instead', async () => {
    serveJob({ state: 'failed', reason: 'reward module nosuch not found', retryable: false })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByText('This job failed')).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'Resume' })).toBeNull()
    expect(screen.getByText(/fix the settings and start a new job/)).toBeInTheDocument()
    expect(screen.getByRole('link', { name: 'Start a new job from these settings' })).toHaveAttribute('href', '/training/new?from_job=job_1')
  })

  test('a paused job offers Resume only when the server says it is retryable', async () => {
    serveJob({ state: 'paused', retryable: true })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByRole('button', { name: 'Resume' })).toBeInTheDocument()
  })

  test('cancel is confirmed before it is sent', async () => {
    serveJob()
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    await userEvent.click(await screen.findByRole('button', { name: 'Cancel job' }))
    expect(screen.getByRole('dialog')).toHaveTextContent(/cannot be resumed/)
    expect(fetchMock.mock.calls.some(([r]) => r instanceof Request && r.url.endsWith('/cancel'))).toBe(false)
    await userEvent.click(screen.getByRole('button', { name: 'Yes, cancel the job' }))
    expect(await screen.findByText('cancelled')).toBeInTheDocument()
  })

  test('a Tinker SDK run: its badge, live charts, Stop (no Pause) with what the client will see', async () => {
    serveJob({ algorithm: 'tinker_sdk', resource: 'server', dataset_id: null, total_steps: null, progress: null, eta_s: null, config: { model_id: 'sess-1:train:0' } })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('sdk-badge')).toHaveTextContent('Tinker SDK')
    expect(await screen.findByTestId('latest-train_mean_nll')).toHaveTextContent('4.1')
    expect(screen.queryByRole('button', { name: 'Pause' })).toBeNull()
    await userEvent.click(screen.getByRole('button', { name: 'Stop run' }))
    expect(screen.getByText(/this run was stopped from the Thinker dashboard/)).toBeInTheDocument()
    await userEvent.click(screen.getByRole('button', { name: 'Yes, stop the run' }))
    expect(await screen.findByText('cancelled')).toBeInTheDocument()
    expect(fetchMock.mock.calls.some(([r]) => r instanceof Request && r.url.endsWith('/job_1/cancel'))).toBe(true)
  })

  test('a job that continues from a library model links to it', async () => {
    serveJob({ parent_model_id: 'mdl_parent' })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('parent-model')).toHaveTextContent('continues from mdl_parent')
    expect(screen.getByRole('link', { name: 'mdl_parent' })).toHaveAttribute('href', '/models/mdl_parent')
  })
})

describe('an RL job', () => {
  test('its Rollouts tab is the inspector: histograms, filters, episodes with their tokens', async () => {
    const seen = serveJob({ algorithm: 'rl', name: 'arith-rl' })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    await userEvent.click(await screen.findByRole('tab', { name: 'Rollouts' }))
    expect(await screen.findByRole('figure', { name: 'Sampler − trainer gap' })).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Latest (follows)' })).toHaveAttribute('aria-pressed', 'true')
    await userEvent.click(screen.getByRole('radio', { name: /^Truncated/ }))
    await userEvent.click(screen.getByRole('button', { name: /77777/ }))
    expect(screen.getAllByTestId('token').map((t) => t.textContent)).toEqual(['77', '777', '↵\n', '∅'])
    expect(seen).toContain('GET /api/jobs/job_1/rollouts')
  })
})

describe('where it runs, and its attempts', () => {
  const RAY_B = { executor: 'ray', hostname: 'host-b', node_ip: '10.0.0.5', node_id: 'n-b', gpus: ['0', '1'] }
  const RAY_C = { executor: 'ray', hostname: 'host-c', node_ip: '10.0.0.6', node_id: 'n-c', gpus: ['2'] }
  const history = () => [
    ev(1, 'state', { state: 'queued' }),
    ev(2, 'state', { state: 'starting', device: 'cuda:0', attempt: 1 }),
    ev(3, 'placement', { ...RAY_B, attempt: 1 }),
    ev(4, 'state', { state: 'running' }),
    ev(5, 'metrics', { step: 1, metrics: { train_mean_nll: 5.9 } }),
    ev(6, 'state', { state: 'interrupted', reason: 'the Ray node 10.0.0.5 (host-b) was lost', log_tail: 'step 1 ok' }),
    ev(7, 'state', { state: 'queued', resumed: true, auto: { retry: 1, of: 2, after: 'the Ray node 10.0.0.5 (host-b) was lost' } }),
    ev(8, 'state', { state: 'starting', device: 'cuda:0', attempt: 2 }),
    ev(9, 'placement', { ...RAY_C, attempt: 2 }),
    ev(10, 'state', { state: 'running' }),
  ]

  test('a job with one attempt: where it runs, no attempts panel, and no history read', async () => {
    serveJob({ placement: RAY_B })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('job-placement')).toHaveTextContent('Runs on node 10.0.0.5 (host-b) · GPUs 0,1 · Ray')
    expect(screen.queryByRole('table', { name: 'attempts' })).toBeNull()
    expect(fetchMock.mock.calls.some(([r]) => r instanceof Request && r.url.includes('/events'))).toBe(false)
  })

  test('a local CPU job says so; none is shown before the worker is placed', async () => {
    serveJob({ placement: { executor: 'local', hostname: 'box', gpus: [] } })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('job-placement')).toHaveTextContent(/^local · CPU$/)
    cleanup()
    serveJob({ placement: null })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    await screen.findByTestId('job-progress')
    expect(screen.queryByTestId('job-placement')).toBeNull()
  })

  test('a node lost and resumed by itself: each attempt, where it ran, how it ended, and live', async () => {
    const events = history()
    const seen = serveJob({ attempts: 2, auto_resumes: 1, auto_resume: 2, placement: RAY_C, last_seq: 10 }, [], events)
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    const table = await screen.findByRole('table', { name: 'attempts' })
    expect(screen.getByTestId('attempts-summary')).toHaveTextContent('2 attempts · auto-resume: used 1 of 2')
    expect(screen.getByTestId('job-placement')).toHaveTextContent('Runs on node 10.0.0.6 (host-c) · GPU 2 · Ray')
    const first = screen.getByTestId('attempt-1')
    expect(first).toHaveTextContent('node 10.0.0.5 (host-b) · GPUs 0,1 · Ray')
    expect(first).toHaveTextContent('interrupted')
    expect(first).toHaveTextContent('the Ray node 10.0.0.5 (host-b) was lost')
    expect(first).toHaveTextContent('resumed automatically, retry 1 of 2')
    const second = screen.getByTestId('attempt-2')
    expect(second).toHaveTextContent('node 10.0.0.6 (host-c) · GPU 2 · Ray')
    expect(second).toHaveTextContent('running')
    expect(table.querySelectorAll('tbody tr')).toHaveLength(2)

    // live: the second attempt's worker is lost too; a person resumes it; it is placed again
    // (the server writes the events, then sends them)
    const next = [
      ev(11, 'state', { state: 'interrupted', reason: 'the worker (pid 7) exited with code -9 before the job finished', log_tail: '' }),
      ev(12, 'state', { state: 'queued', resumed: true }),
      ev(13, 'state', { state: 'starting', device: 'cuda:0', attempt: 3 }),
      ev(14, 'placement', { ...RAY_B, attempt: 3 }),
    ]
    events.push(...next)
    act(() => socket.serverSends('job_events', next))
    expect(await screen.findByTestId('attempt-3')).toHaveTextContent('node 10.0.0.5 (host-b) · GPUs 0,1 · Ray')
    expect(screen.getByTestId('attempt-2')).toHaveTextContent('exited with code -9')
    expect(screen.getByTestId('attempt-2')).toHaveTextContent('resumed by a person')
    expect(screen.getByTestId('attempts-summary')).toHaveTextContent('3 attempts · auto-resume: used 1 of 2')
    expect(screen.getByTestId('job-placement')).toHaveTextContent('node 10.0.0.5 (host-b)')
    // the history was read once, then only what was new
    const reads = seen.filter((r) => r.startsWith('GET /api/jobs/job_1/events'))
    expect(reads[0]).toBe('GET /api/jobs/job_1/events?after_seq=0&limit=10000')
    expect(reads.length).toBeGreaterThan(1)
    expect(reads.slice(1).every((r) => !r.includes('after_seq=0'))).toBe(true)
  })
})

describe('the report of an ended job', () => {
  const done = { state: 'succeeded', step: 10, eta_s: null, finished_at: '2026-01-01T00:01:00Z' }
  const lastModel = { id: 'mdl_last', name: 'arith-sl@10', step: 10, job_id: 'job_1' }

  test('learned: the verdict in plain words, the samples, and the Playground', async () => {
    serveJob({ ...done, report: report() }, [{ ...lastModel, id: 'mdl_first', step: 5 }, lastModel])
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('verdict')).toHaveTextContent('Learned: held-out exact match 0.68 vs 0.00 for the base model')
    const samples = screen.getByRole('table', { name: 'held-out samples' })
    expect(samples).toHaveTextContent('3+4')
    expect(samples).toHaveTextContent('3+4+4+4')
    expect(screen.getByText('empty answers:')).toBeInTheDocument()
    expect(await screen.findByRole('link', { name: 'Try it in the Playground' })).toHaveAttribute('href', '/playground?model=mdl_last')
    expect(screen.queryByText(/Train again/)).toBeNull()
  })

  test('not learned: each warning with its cause and the setting to change; no Playground', async () => {
    const warning = { code: 'empty_answers', message: 'Every held-out answer is empty.', cause: 'Too few steps for an untrained model.', fix: 'raise max_steps to ~300' }
    serveJob(
      { ...done, report: report({ verdict: 'not_learned', metric: { name: 'exact_match', label: 'held-out exact match', value: 0, base: 0, higher_is_better: true }, warnings: [warning], samples: [{ prompt: '1+1', reference: '2', answer: '', base_answer: '' }] }) },
      [lastModel],
    )
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('verdict')).toHaveTextContent('Did not learn: held-out exact match 0.00 vs 0.00 for the base model')
    expect(screen.getByText('Every held-out answer is empty.')).toBeInTheDocument()
    expect(screen.getByText('Too few steps for an untrained model.')).toBeInTheDocument()
    expect(screen.getByText('raise max_steps to ~300')).toBeInTheDocument()
    expect(screen.getAllByText('(empty)')).toHaveLength(2)
    expect(screen.getByRole('link', { name: /Train again with these settings changed/ })).toHaveAttribute('href', '/training/new?from_job=job_1')
    await screen.findByRole('link', { name: 'Open in Models' })
    expect(screen.queryByRole('link', { name: 'Try it in the Playground' })).toBeNull()
  })

  test('no report (an older job): done, without claiming it learned', async () => {
    serveJob({ ...done, report: null })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByText(/has no report/)).toBeInTheDocument()
    expect(screen.queryByTestId('verdict')).toBeNull()
    expect(screen.queryByRole('link', { name: 'Try it in the Playground' })).toBeNull()
  })
})

describe('a batch job', () => {
  test('its results take the report\'s place; no checkpoints, no models; progress in shards', async () => {
    const counts = { answered: 8, failed: 0, flagged: 1, applied: 7, verified: 0, verification_failed: 0 }
    const seen = answer(fetchMock, {
      'GET /api/jobs/job_1': () => ({
        body: job({ algorithm: 'batch', name: 'arith-batch', config: { samples: 4 }, state: 'succeeded', step: 2, total_steps: 2, progress: 1, eta_s: null, finished_at: '2026-01-01T00:01:00Z' }),
      }),
      'GET /api/jobs/job_1/metrics': () => ({
        body: {
          data: [
            { step: 1, inputs_done: 4, inputs_total: 8, answered: 4, flagged: 0, applied: 4, mean_confidence: 1 },
            { step: 2, inputs_done: 8, inputs_total: 8, answered: 8, flagged: 1, applied: 7, mean_confidence: 0.875 },
          ],
          count: 2,
          next_offset: null,
        },
      }),
      'GET /api/jobs/job_1/results': () => ({
        body: { total: 1, counts, actors: [], data: [{ index: 0, output: '7', confidence: 1, samples: 4, flagged: false, apply: true }] },
      }),
    })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('count-answered')).toHaveTextContent('8')
    expect(screen.getByText('of 8 inputs')).toBeInTheDocument()
    expect(screen.getByTestId('count-mean_confidence')).toHaveTextContent('88%')
    expect(screen.getByTestId('result-0')).toHaveTextContent('100%')
    expect(screen.getByRole('link', { name: 'Download JSONL' })).toHaveAttribute('href', '/api/jobs/job_1/results/download')
    expect(screen.getByTestId('job-progress')).toHaveTextContent('shard 2 / 2')
    expect(screen.getByText('Batch · Batch answers')).toBeInTheDocument()
    // the shards' counts are charted, under their own names
    expect(screen.getByTestId('latest-mean_confidence')).toHaveTextContent('0.875')
    expect(screen.getByRole('article', { name: 'Applied and flagged' })).toBeInTheDocument()
    // nothing of training: no report, no checkpoints, no models asked for
    expect(screen.queryByText(/has no report/)).toBeNull()
    expect(screen.queryByRole('tab', { name: 'Checkpoints' })).toBeNull()
    expect(screen.queryByRole('tab', { name: 'Rollouts' })).toBeNull()
    expect(seen.some((r) => r.startsWith('GET /api/models') || r.includes('/checkpoints'))).toBe(false)
  })
})

describe('an eval job', () => {
  test('its evaluation takes the report\'s place; no checkpoints, no models; progress in models', async () => {
    const summary = {
      dataset: '/srv/ds.jsonl', prompts: 100, scorer: 'exact_match', samples: 1, temperature: 0, alpha: 0.05,
      models: [
        { name: 'thinker/tiny', model: 'thinker/tiny', id: null, score_mean: -0.076, score_interval: [-0.098, -0.045], nll_mean: 5.96, prompts: 100, terminated_rate: 0.04 },
        { name: 'arith-sl@100', model: '/srv/w', id: 'mdl_a', score_mean: 0.1, score_interval: [0.05, 0.16], nll_mean: 0.3, prompts: 100, terminated_rate: 1 },
      ],
      comparisons: [{
        a: 'thinker/tiny', b: 'arith-sl@100', n: 100, wins: 95, ties: 3, losses: 2, win_rate: 0.965, interval: [0.93, 0.99], p_value: 6e-26, significant: true,
        verdict: 'arith-sl@100 is better: 96% win rate [93%, 99%], p < 0.0001, n = 100 (3 ties, left out of the sign test)',
      }],
      leaderboard: [
        { model: 'arith-sl@100', rank: 1, rating: 1460.6, strength: 14.2, wins: 97.5, games: 100 },
        { model: 'thinker/tiny', rank: 2, rating: 539.4, strength: 0.07, wins: 2.5, games: 100 },
      ],
    }
    const seen = answer(fetchMock, {
      'GET /api/jobs/job_1': () => ({
        body: job({ algorithm: 'eval', name: 'arith-eval', config: { models: [{ model: 'thinker/tiny' }, { model: '/srv/w', name: 'arith-sl@100', id: 'mdl_a' }] }, state: 'succeeded', step: 2, total_steps: 2, progress: 1, eta_s: null, finished_at: '2026-01-01T00:01:00Z' }),
      }),
      'GET /api/jobs/job_1/metrics': () => ({
        body: { data: [{ step: 1, score_mean: -0.076, nll_mean: 5.96 }, { step: 2, score_mean: 0.1, nll_mean: 0.3 }], count: 2, next_offset: null },
      }),
      'GET /api/jobs/job_1/evaluation': () => ({ body: { summary, total: 0, data: [] } }),
    })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('verdict')).toHaveTextContent('arith-sl@100 is better: 96% win rate [93%, 99%], p < 0.0001, n = 100')
    // the axis rounds as the verdict does
    expect(screen.getByTestId('win-rate')).toHaveTextContent('96%')
    expect(screen.getByTestId('job-progress')).toHaveTextContent('model 2 / 2')
    expect(screen.getByText('Eval · Evaluate (A/B)')).toBeInTheDocument()
    // each model's score is charted, under its own name
    expect(screen.getByRole('article', { name: 'Mean score' })).toBeInTheDocument()
    // nothing of training: no report, no checkpoints, no models asked for
    expect(screen.queryByText(/has no report/)).toBeNull()
    expect(screen.queryByRole('tab', { name: 'Checkpoints' })).toBeNull()
    expect(seen.some((r) => r.startsWith('GET /api/models') || r.includes('/checkpoints') || r.includes('/report'))).toBe(false)
  })
})


describe('a review job', () => {
  test('its queue takes the report\'s place; it names the reward model it reviews; progress in checkpoints', async () => {
    const summary = {
      pairs: 40, committee: 2, queue_size: 1, unanimous: 0.9,
      calibration: { ece: 0.05, confidence: 0.8, accuracy: 0.75, bins: [{ low: 0.9, high: 1, pairs: 40, confidence: 0.8, accuracy: 0.75 }] },
      checkpoints: [{ weights: '/w/000040', accuracy: 0.7 }, { weights: '/w/000060', accuracy: 0.75 }],
    }
    const item = { pair: 3, line: 4, prompt: [{ role: 'user', content: 'Is 91 prime?' }], a: 'yes', b: 'no', uncertainty: 0.97, disagreement: 0.2, answer: null, label: null, p_a: null, p_mean: null }
    const seen = answer(fetchMock, {
      'GET /api/jobs/job_1': () => ({
        body: job({ algorithm: 'review', name: 'pairs-review', parent_model_id: 'mdl_rm', config: {}, state: 'succeeded', step: 2, total_steps: 2, progress: 1, eta_s: null, finished_at: '2026-01-01T00:01:00Z' }),
      }),
      'GET /api/jobs/job_1/metrics': () => ({ body: { data: [{ step: 1, review_accuracy: 0.7 }, { step: 2, review_accuracy: 0.75 }], count: 2, next_offset: null } }),
      'GET /api/jobs/job_1/review': () => ({ body: { summary, answered: 0, data: [item] } }),
    })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('pair-3')).toHaveTextContent('Is 91 prime?')
    expect(screen.getByRole('heading', { name: 'Review' })).toBeInTheDocument()
    expect(screen.getByTestId('job-progress')).toHaveTextContent('checkpoint 2 / 2')
    expect(screen.getByText('Review · Reward model review')).toBeInTheDocument()
    expect(screen.getByTestId('parent-model')).toHaveTextContent('reviews mdl_rm')
    expect(screen.getByRole('article', { name: 'Agreement with the labels' })).toBeInTheDocument()
    expect(screen.queryByText(/has no report/)).toBeNull()
    expect(screen.queryByRole('tab', { name: 'Checkpoints' })).toBeNull()
    expect(seen.some((r) => r.includes('/checkpoints') || r.includes('/report'))).toBe(false)
  })
})
