import { cleanup, screen } from '@testing-library/react'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt, report } from '../../components/Training/testing'
import { JobListPage } from './JobListPage'

// The client captures fetch when it is created, so the mock must exist before any import;
// Node's Request needs an origin to resolve the client's relative URLs, as a page has.
const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => {
  cleanup()
  fetchMock.mockReset()
})

// Four steps two seconds apart after a slow first one (loading the model).
const metrics = {
  data: [
    { step: 1, time: 1030, train_mean_nll: 5.9 }, { step: 2, time: 1032, train_mean_nll: 5.1 },
    { step: 3, time: 1034, train_mean_nll: 4.6 }, { step: 4, time: 1036, train_mean_nll: 4.2 },
  ],
  count: 4, next_offset: null,
}

describe('job list', () => {
  test('loading, then the jobs with state, progress, a steady ETA, the held-out verdict and the latest loss', async () => {
    const learned = report()
    const flat = report({ verdict: 'not_learned', metric: { name: 'exact_match', label: 'held-out exact match', value: 0, base: 0, higher_is_better: true } })
    answer(fetchMock, {
      'GET /api/jobs': () => ({
        body: {
          data: [
            // The server's ETA (time since start ÷ steps) counts the slow start: 400 s, not 12 s.
            job({ step: 4, eta_s: 400 }),
            job({ id: 'job_2', name: 'prefs', algorithm: 'dpo', state: 'failed', reason: 'boom', eta_s: null, step: 0, total_steps: null, progress: null }),
            job({ id: 'job_3', name: 'arith-done', state: 'succeeded', step: 10, eta_s: null, report: learned }),
            job({ id: 'job_4', name: 'arith-flat', state: 'succeeded', step: 10, eta_s: null, report: flat }),
          ],
          count: 4,
        },
      }),
      'GET /api/jobs/job_1/metrics': () => ({ body: metrics }),
      'GET /api/jobs/job_2/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
      'GET /api/jobs/job_3/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
      'GET /api/jobs/job_4/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
    })
    renderAt(<JobListPage />, '/training')
    expect(screen.getByRole('status')).toHaveTextContent(/loading jobs/i)
    expect(await screen.findByText('arith-sl')).toBeInTheDocument()
    expect(screen.getByText('prefs')).toBeInTheDocument()
    expect(screen.getByText('4/10')).toBeInTheDocument()
    expect(await screen.findByText('ETA 12 s')).toBeInTheDocument() // 2 s per step × 6 left
    expect(screen.queryByText(/ETA 6 min/)).toBeNull()
    expect(screen.getByText('failed: see why')).toBeInTheDocument()
    expect(screen.getByText('Held-out (vs base)')).toBeInTheDocument()
    expect(screen.getByText('exact match 0.68 (base 0.00)').parentElement).toHaveClass('text-ok')
    expect(screen.getByText('exact match 0.00 (base 0.00)').parentElement).toHaveClass('text-bad')
    expect(await screen.findByText('4.2')).toBeInTheDocument()
    expect(screen.getAllByText('no metrics yet').length).toBeGreaterThan(0)
  })

  test('a Tinker SDK client\'s run: its badge, its live loss, no held-out report to wait for', async () => {
    const sdk = job({
      id: 'job_sdk', name: 'tinker-sdk', algorithm: 'tinker_sdk', resource: 'server', dataset_id: null,
      config: { model_id: 'sess-1:train:0', lora_rank: 8 }, step: 3, total_steps: null, progress: null,
      eta_s: null, created_by: 'alice-laptop',
    })
    answer(fetchMock, {
      'GET /api/jobs': () => ({ body: { data: [sdk], count: 1 } }),
      'GET /api/jobs/job_sdk/metrics': () => ({
        body: {
          data: [
            { step: 1, time: 1, 'loss:sum': 40.1, train_mean_nll: 4.01, learning_rate: 0.01 },
            { step: 2, time: 2, 'loss:sum': 35.2, train_mean_nll: 3.52, learning_rate: 0.01 },
            { step: 3, time: 3, 'loss:sum': 30.7, train_mean_nll: 3.07, learning_rate: 0.01 },
          ],
          count: 3, next_offset: null,
        },
      }),
    })
    renderAt(<JobListPage />, '/training')
    const badge = await screen.findByTestId('sdk-badge')
    expect(badge).toHaveTextContent('Tinker SDK')
    expect(badge).toHaveAttribute('title', expect.stringContaining('sess-1:train:0'))
    expect(badge).toHaveAttribute('title', expect.stringContaining('alice-laptop'))
    expect(screen.queryByText('SL')).toBeNull()
    expect(screen.getByText('3/?')).toBeInTheDocument()
    expect(await screen.findByText('3.07')).toBeInTheDocument() // the sparkline's latest NLL
    expect(screen.queryByText('after training')).toBeNull()
  })

  test('no ETA before the third step', async () => {
    answer(fetchMock, {
      'GET /api/jobs': () => ({ body: { data: [job({ step: 2, eta_s: 5 })], count: 1 } }),
      'GET /api/jobs/job_1/metrics': () => ({ body: { ...metrics, data: metrics.data.slice(0, 2) } }),
    })
    renderAt(<JobListPage />, '/training')
    expect(await screen.findByText('5.1')).toBeInTheDocument()
    expect(screen.getByText('2/10')).toBeInTheDocument()
    expect(screen.queryByText(/ETA/)).toBeNull()
  })

  test('empty: the next step is the wizard', async () => {
    answer(fetchMock, { 'GET /api/jobs': () => ({ body: { data: [], count: 0 } }) })
    renderAt(<JobListPage />, '/training')
    expect(await screen.findByText('No training jobs yet')).toBeInTheDocument()
    const links = screen.getAllByRole('link', { name: 'Start with the wizard' })
    expect(links.every((a) => a.getAttribute('href') === '/training/wizard')).toBe(true)
  })

  test('error: the server message and what to do', async () => {
    answer(fetchMock, { 'GET /api/jobs': () => ({ status: 500, body: { detail: 'database is locked' } }) })
    renderAt(<JobListPage />, '/training')
    expect(await screen.findByRole('alert')).toHaveTextContent(/database is locked/)
    expect(screen.getByRole('alert')).toHaveTextContent(/server is running/)
  })
})
