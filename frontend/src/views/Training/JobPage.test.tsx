import { act, cleanup, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../../components/Training/testing'
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

function serveJob(overrides: Record<string, unknown> = {}) {
  answer(fetchMock, {
    'GET /api/jobs/job_1': () => ({ body: job(overrides) }),
    'GET /api/jobs/job_1/metrics': () => ({
      body: { data: [{ step: 1, train_mean_nll: 5.9, learning_rate: 0.003 }, { step: 2, train_mean_nll: 4.1, learning_rate: 0.003 }], count: 2, next_offset: null },
    }),
    'GET /api/jobs/job_1/logs': () => ({ body: { lines: ['[thinker] plan: {"total_steps": 10}'], total_lines: 1 } }),
    'GET /api/jobs/job_1/checkpoints': () => ({ body: { data: [] } }),
    'GET /api/models': () => ({ body: { data: [], count: 0 } }),
    'POST /api/jobs/job_1/cancel': () => ({ body: job({ ...overrides, state: 'cancelled' }) }),
  })
}

describe('job page', () => {
  test('joins the job room and applies live metrics, state and log events', async () => {
    serveJob()
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByTestId('latest-train_mean_nll')).toHaveTextContent('4.1')
    expect(socket.emitted).toContainEqual(['join_job', { job_id: 'job_1', after_seq: 0 }])
    expect(screen.getByTestId('job-progress')).toHaveTextContent('step 2 / 10')

    // A replayed row (step 2 again) must not duplicate; a new step updates chart and progress.
    act(() => {
      socket.serverSends('job_event', ev(6, 'metrics', { step: 2, metrics: { train_mean_nll: 4.1, learning_rate: 0.003 } }))
      socket.serverSends('job_event', ev(7, 'metrics', { step: 3, metrics: { train_mean_nll: 9.5, learning_rate: 0.003 } }))
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

  test('a failed job shows its reason and log tail; cancel asks first', async () => {
    serveJob({ state: 'failed', reason: 'reward module nosuch not found', log_tail: 'Traceback: ...' })
    renderAt(<JobPage />, '/training/job_1', '/training/:jobId')
    expect(await screen.findByText('This job failed')).toBeInTheDocument()
    expect(screen.getByText('reward module nosuch not found')).toBeInTheDocument()
    expect(screen.getByText('Traceback: ...')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Resume' })).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'Cancel job' })).toBeNull()
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
})
