import { cleanup, screen } from '@testing-library/react'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { DeploySteps } from './DeploySteps'
import { answer, job, renderAt, report } from './testing'

const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})
vi.mock('socket.io-client', () => ({
  io: () => ({ connected: false, on() {}, off() {}, emit() {}, disconnect() {} }),
}))

afterEach(() => {
  cleanup()
  fetchMock.mockReset()
})

function serve(overrides: Record<string, unknown>) {
  answer(fetchMock, {
    'GET /api/jobs/job_1': () => ({ body: job({ state: 'succeeded', step: 10, eta_s: null, ...overrides }) }),
    'GET /api/jobs/job_1/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
    'GET /api/models': () => ({ body: { data: [{ id: 'mdl_9', name: 'arith-sl@10', step: 10, job_id: 'job_1' }], count: 1 } }),
  })
}

describe('the launch step, once the job is done', () => {
  test('learned: the verdict, then the Playground', async () => {
    serve({ report: report() })
    renderAt(<DeploySteps jobId="job_1" />, '/training/wizard')
    expect(await screen.findByTestId('verdict')).toHaveTextContent('Done. Learned: held-out exact match 0.68 vs 0.00 for the base model.')
    expect(await screen.findByRole('link', { name: 'Try it in the Playground' })).toHaveAttribute('href', '/playground?model=mdl_9')
  })

  test('not learned: said so, with the first warning and what to change; no Playground', async () => {
    const warnings = [
      { code: 'no_better_than_base', message: 'No better than the base model.', cause: 'Too few steps.', fix: 'raise num_epochs to 10' },
      { code: 'repeats', message: 'Answers repeat.', cause: 'x', fix: 'y' },
    ]
    serve({ report: report({ verdict: 'not_learned', metric: { name: 'exact_match', label: 'held-out exact match', value: 0.01, base: 0.01, higher_is_better: true }, warnings }) })
    renderAt(<DeploySteps jobId="job_1" />, '/training/wizard')
    expect(await screen.findByTestId('verdict')).toHaveTextContent('Did not learn: held-out exact match 0.01 vs 0.01 for the base model')
    expect(screen.getByText('No better than the base model.')).toBeInTheDocument()
    expect(screen.getByText('raise num_epochs to 10')).toBeInTheDocument()
    expect(screen.queryByText('Answers repeat.')).toBeNull()
    expect(screen.queryByRole('link', { name: 'Try it in the Playground' })).toBeNull()
    expect(screen.getByRole('link', { name: /Train again/ })).toHaveAttribute('href', '/training/new?from_job=job_1')
  })

  test('failed and not retryable: start a new job instead of resuming', async () => {
    serve({ state: 'failed', reason: 'config.reward: unknown module', retryable: false })
    renderAt(<DeploySteps jobId="job_1" />, '/training/wizard')
    expect(await screen.findByText(/Fix the settings and/)).toBeInTheDocument()
    expect(screen.queryByText(/to resume/)).toBeNull()
    expect(screen.getByRole('link', { name: 'start a new job from them' })).toHaveAttribute('href', '/training/new?from_job=job_1')
  })
})
