// Test helpers for the Training view: only the network is replaced. `answer` serves fetch
// from a table of "METHOD /path" → JSON (handlers get the query and the JSON body sent);
// `renderAt` mounts a page in a router and a fresh cache.
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render } from '@testing-library/react'
import type { ReactElement } from 'react'
import { MemoryRouter, Route, Routes } from 'react-router-dom'
import type { Mock } from 'vitest'

export type Routes_ = Record<string, (search: URLSearchParams, sent: unknown) => { status?: number; body: unknown } | Promise<{ status?: number; body: unknown }>>

export function answer(fetchMock: Mock, routes: Routes_): string[] {
  const seen: string[] = []
  fetchMock.mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : null
    const url = new URL(request ? request.url : String(input), 'http://localhost')
    const key = `${request?.method ?? init?.method ?? 'GET'} ${url.pathname}`
    seen.push(`${key}${url.search}`)
    const route = routes[key]
    const text = request ? await request.clone().text() : typeof init?.body === 'string' ? init.body : ''
    const sent: unknown = text ? JSON.parse(text) : null
    const { status = 200, body } = route ? await route(url.searchParams, sent) : { status: 404, body: { detail: `no route ${key}` } }
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
  })
  return seen
}

export function renderAt(ui: ReactElement, path: string, pattern = '*') {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  const view = render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path={pattern} element={ui} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
  return { ...view, client }
}

export function job(overrides: Record<string, unknown> = {}) {
  return {
    id: 'job_1', name: 'arith-sl', algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny',
    dataset_id: 'ds_1', config: { max_steps: 10 }, state: 'running', reason: null, log_tail: null,
    priority: 0, resource: 'cpu', device: null, step: 2, total_steps: 10, progress: 0.2, eta_s: 40,
    attempts: 1, gpus: 1, memory_gb: null, auto_resume: 2, auto_resumes: 0, placement: null,
    last_seq: 5, parent_model_id: null, retryable: false, report: null,
    heartbeat_at: null, heartbeat_age_s: null, stale: false, created_at: '2026-01-01T00:00:00Z',
    started_at: '2026-01-01T00:00:01Z', finished_at: null, created_by: null, ...overrides,
  }
}

/** A job report as the server writes it when a job ends. */
export function report(overrides: Record<string, unknown> = {}) {
  return {
    verdict: 'learned',
    metric: { name: 'exact_match', label: 'held-out exact match', value: 0.68, base: 0, higher_is_better: true },
    held_out: { num_samples: 50, exact_match: 0.68, mean_nll: 0.41, empty_rate: 0, repeat_rate: 0.02 },
    base: { num_samples: 50, exact_match: 0, mean_nll: 5.2, empty_rate: 0.1, repeat_rate: 0.6 },
    warnings: [],
    samples: [{ prompt: '3+4', reference: '7', answer: '7', base_answer: '3+4+4+4' }],
    ...overrides,
  }
}
