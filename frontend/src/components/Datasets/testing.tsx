// Test helpers: the network is the only thing replaced. Routes answer by method and path;
// every request is recorded with its body so tests can assert what was sent.
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render } from '@testing-library/react'
import type { ReactElement } from 'react'
import { MemoryRouter, Route, Routes, useLocation } from 'react-router-dom'
import type { Mock } from 'vitest'

export interface Sent {
  method: string
  path: string
  search: string
  body: unknown
}

type Handler = (sent: Sent) => { status?: number; body?: unknown }
export type RouteTable = Record<string, Handler>

function formFields(form: FormData): Record<string, FormDataEntryValue> {
  const fields: Record<string, FormDataEntryValue> = {}
  form.forEach((value, key) => {
    fields[key] = value
  })
  return fields
}

async function readBody(request: Request): Promise<unknown> {
  const text = await request.text()
  return text ? JSON.parse(text) : null
}

/** Answer fetch calls from `routes` ("POST /api/datasets" → handler); returns what was sent. */
export function serve(fetchMock: Mock, routes: RouteTable): Sent[] {
  const sent: Sent[] = []
  fetchMock.mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : null
    const url = new URL(request ? request.url : String(input), 'http://test')
    // A FormData body is read as is: the test environment's FormData is not the one Request knows.
    const body = init?.body instanceof FormData ? formFields(init.body) : request ? await readBody(request) : init?.body ? JSON.parse(String(init.body)) : null
    const entry: Sent = { method: request?.method ?? init?.method ?? 'GET', path: url.pathname, search: url.search, body }
    sent.push(entry)
    const handler = routes[`${entry.method} ${entry.path}`]
    const { status = 200, body: answer = null } = handler ? handler(entry) : { status: 404, body: { detail: `no route ${entry.path}` } }
    return new Response(status === 204 ? null : JSON.stringify(answer), { status, headers: { 'Content-Type': 'application/json' } })
  })
  return sent
}

/** Render at `path` inside a router (with a catch-all so navigation can be asserted) and a fresh cache. */
export function renderAt(ui: ReactElement, path: string, pattern = '*') {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path={pattern} element={ui} />
          <Route path="*" element={<LocationProbe />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

function LocationProbe() {
  const location = useLocation()
  return <div data-testid="navigated">{location.pathname + location.search}</div>
}
