// Test helpers for the Training view: only the network is replaced. `answer` serves fetch
// from a table of "METHOD /path" → JSON; `renderAt` mounts a page in a router and a fresh cache.
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render } from '@testing-library/react'
import type { ReactElement } from 'react'
import { MemoryRouter, Route, Routes } from 'react-router-dom'
import type { Mock } from 'vitest'

export type Routes_ = Record<string, (search: URLSearchParams) => { status?: number; body: unknown } | Promise<{ status?: number; body: unknown }>>

export function answer(fetchMock: Mock, routes: Routes_): string[] {
  const seen: string[] = []
  fetchMock.mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : null
    const url = new URL(request ? request.url : String(input), 'http://localhost')
    const key = `${request?.method ?? init?.method ?? 'GET'} ${url.pathname}`
    seen.push(`${key}${url.search}`)
    const route = routes[key]
    const { status = 200, body } = route ? await route(url.searchParams) : { status: 404, body: { detail: `no route ${key}` } }
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
    attempts: 1, last_seq: 5, heartbeat_at: null, created_at: '2026-01-01T00:00:00Z',
    started_at: '2026-01-01T00:00:01Z', finished_at: null, ...overrides,
  }
}
