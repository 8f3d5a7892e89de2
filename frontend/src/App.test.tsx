import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { cleanup, render, screen, within } from '@testing-library/react'
import { MemoryRouter } from 'react-router-dom'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { App } from './App'
import { answer } from './components/Training/testing'

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

function renderApp(path: string) {
  answer(fetchMock, { 'GET /api/health': () => ({ body: { version: '0.1', database: 'sqlite', gpus: 0 } }) })
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[path]}>
        <App />
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

describe('unknown URLs', () => {
  test.each(['/no-such-page', '/models/mdl_1/nothing', '/datasets/ds_1/x/y'])('%s: Not Found, with the five views', async (path) => {
    renderApp(path)
    expect(await screen.findByRole('heading', { name: 'Page not found' })).toBeInTheDocument()
    expect(screen.getByText(path)).toBeInTheDocument()
    const views = within(screen.getByRole('navigation', { name: 'views' })).getAllByRole('link')
    expect(views.map((a) => a.getAttribute('href'))).toEqual(['/training', '/models', '/datasets', '/playground', '/analytics'])
    expect(screen.queryByRole('heading', { name: 'Training' })).toBeNull()
  })
})
