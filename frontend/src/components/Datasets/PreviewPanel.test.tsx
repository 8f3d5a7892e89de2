import { cleanup, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { PreviewPanel } from './PreviewPanel'
import { renderAt, serve } from './testing'

// The client captures fetch when it is created, so the mock must exist before any import.
// Node's Request needs an origin to resolve the client's relative URLs, as a page has.
const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(cleanup)

const preview = {
  id: 'ds_1', kind: 'prompt_completion', offset: 0, limit: 5, total: 1,
  rows: [{ prompt: 'srn', completion: 'nrs' }],
  base_model: 'thinker/tiny', renderer: 'role_colon', train_on_what: 'last_assistant_message', max_length: 30,
  rendered: [{
    line: 1, num_tokens: 32, num_trained_tokens: 9, truncated: true, error: null,
    sequences: [{
      name: 'example', num_tokens: 32, num_trained_tokens: 9, truncated: true,
      segments: [
        { text: 'User: srn\n\nAssistant:', trained: false, truncated: false },
        { text: ' nrs\n\nUs', trained: true, truncated: false },
        { text: 'er:', trained: true, truncated: true },
      ],
    }],
  }],
}

describe('PreviewPanel', () => {
  test('trained text is highlighted, context dim, and text past max_length struck through', async () => {
    const sent = serve(fetchMock, { 'GET /api/datasets/ds_1/preview': () => ({ body: preview }) })
    renderAt(<PreviewPanel id="ds_1" options={{ max_length: 30 }} />, '/datasets/ds_1')
    const row = await screen.findByRole('article', { name: 'line 1' })
    const context = within(row).getByText(/User: srn/)
    const trained = within(row).getByText(/nrs/)
    const cut = within(row).getByText('er:')
    expect(context).toHaveAttribute('data-trained', 'false')
    expect(context).toHaveClass('text-neutral-500')
    expect(trained).toHaveAttribute('data-trained', 'true')
    expect(trained).toHaveClass('text-cta')
    expect(cut).toHaveAttribute('data-truncated', 'true')
    expect(cut).toHaveClass('line-through')
    expect(within(row).getByText('9 trained')).toBeInTheDocument()
    expect(within(row).getByText('truncated')).toBeInTheDocument()
    // The segments concatenate to the rendered text, in order.
    expect(row.querySelector('pre')?.textContent).toBe('User: srn\n\nAssistant: nrs\n\nUser:')
    expect(new URLSearchParams(sent[0].search).get('max_length')).toBe('30')
  })

  test('a bad rendering option shows the server message and what to change', async () => {
    serve(fetchMock, {
      'GET /api/datasets/ds_2/preview': () => ({ status: 422, body: { detail: "unknown renderer 'x'; use role_colon, llama3" } }),
    })
    renderAt(<PreviewPanel id="ds_2" options={{ renderer: 'x' }} />, '/datasets/ds_2')
    expect(await screen.findByText(/unknown renderer 'x'/)).toBeInTheDocument()
    expect(screen.getByText(/Change the base model, renderer/)).toBeInTheDocument()
  })
})
