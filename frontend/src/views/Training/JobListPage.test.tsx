import { cleanup, screen } from '@testing-library/react'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../../components/Training/testing'
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

const metrics = { data: [{ step: 1, train_mean_nll: 5.9 }, { step: 2, train_mean_nll: 4.2 }], count: 2, next_offset: null }

describe('job list', () => {
  test('loading, then the jobs with state, progress, ETA and the latest loss', async () => {
    answer(fetchMock, {
      'GET /api/jobs': () => ({ body: { data: [job(), job({ id: 'job_2', name: 'prefs', algorithm: 'dpo', state: 'failed', reason: 'boom', eta_s: null, step: 0, total_steps: null, progress: null })], count: 2 } }),
      'GET /api/jobs/job_1/metrics': () => ({ body: metrics }),
      'GET /api/jobs/job_2/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
    })
    renderAt(<JobListPage />, '/training')
    expect(screen.getByRole('status')).toHaveTextContent(/loading jobs/i)
    expect(await screen.findByText('arith-sl')).toBeInTheDocument()
    expect(screen.getByText('prefs')).toBeInTheDocument()
    expect(screen.getByText('2/10')).toBeInTheDocument()
    expect(screen.getByText('ETA 40 s')).toBeInTheDocument()
    expect(screen.getByText('failed: see why')).toBeInTheDocument()
    expect(await screen.findByText('4.2')).toBeInTheDocument()
    expect(screen.getByText('no metrics yet')).toBeInTheDocument()
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
