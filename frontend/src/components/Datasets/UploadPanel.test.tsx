import { cleanup, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { renderAt, serve, type Sent } from './testing'
import { UploadPanel } from './UploadPanel'

// The client captures fetch when it is created, so the mock must exist before any import.
// Node's Request needs an origin to resolve the client's relative URLs, as a page has.
const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

const detection = {
  format: 'jsonl',
  kind: 'prompt_completion',
  mapping: { prompt: 'question' },
  fields: ['question', 'response'],
  suggestions: ['field `response` looks like the completion: map it?'],
  sample: [{ question: 'abc', response: 'cba' }],
  validation: {
    kind: 'prompt_completion', mapping: { prompt: 'question' }, rows: 8, error_count: 8,
    error_counts: { missing: 8 },
    errors: [{ line: 1, field: 'completion', kind: 'missing', message: 'missing' }],
  },
}

const rejection = {
  detail: 'upload rejected: 2 problem(s) in 8 row(s) read from jsonl; first: line 3: malformed JSON',
  errors: [
    { line: 3, field: null, kind: 'malformed_json', message: 'malformed JSON: Expecting value (column 15)' },
    { line: 7, field: 'completion', kind: 'empty', message: 'is empty' },
  ],
  error_count: 2,
  error_counts: { malformed_json: 1, empty: 1 },
}

afterEach(cleanup)
let sent: Sent[]
beforeEach(() => {
  sent = serve(fetchMock, {
    'POST /api/datasets/detect': () => ({ body: detection }),
    'POST /api/datasets': () => ({ status: 422, body: rejection }),
  })
})

describe('UploadPanel', () => {
  test('detect, apply a suggestion, edit the mapping, store: the 422 errors show with their lines', async () => {
    const user = userEvent.setup()
    renderAt(<UploadPanel />, '/datasets/upload', '/datasets/upload')
    const file = new File(['{"question": "abc", "response": "cba"}\n'], 'qa.jsonl', { type: 'application/jsonl' })
    await user.upload(screen.getByLabelText('dataset file'), file)

    // Detection: format, kind, the proposed mapping and its validation, nothing stored.
    expect(await screen.findByText('JSONL')).toBeInTheDocument()
    expect(screen.getByLabelText('kind')).toHaveValue('prompt_completion')
    expect(screen.getByLabelText('source for prompt')).toHaveValue('question')
    expect(screen.getByText('8 problems')).toBeInTheDocument()
    expect(sent.map((s) => `${s.method} ${s.path}`)).toEqual(['POST /api/datasets/detect'])

    // One click applies the suggestion as a mapping row.
    await user.click(within(screen.getByLabelText('suggestions')).getByRole('button', { name: 'Apply' }))
    expect(screen.getByLabelText('source for completion')).toHaveValue('response')
    expect(screen.getByText('✓ in the mapping')).toBeInTheDocument()

    // Edit a row by hand: the prompt joins two fields.
    const prompt = screen.getByLabelText('source for prompt')
    await user.clear(prompt)
    await user.type(prompt, 'question+context')
    expect(screen.getByText(/mapping changed since this check/)).toBeInTheDocument()

    await user.click(screen.getByRole('button', { name: 'Store dataset' }))
    const alert = await screen.findByRole('alert')
    expect(within(alert).getByText(/nothing was stored/)).toBeInTheDocument()
    const lines = within(alert).getAllByTestId('error-line').map((cell) => cell.textContent)
    expect(lines).toEqual(['line 3', 'line 7'])
    expect(within(alert).getByText('malformed JSON: Expecting value (column 15)')).toBeInTheDocument()
    expect(within(alert).getByText('malformed_json × 1')).toBeInTheDocument()

    const store = sent.find((s) => s.method === 'POST' && s.path === '/api/datasets')
    const body = store?.body as Record<string, unknown>
    expect(body.kind).toBe('prompt_completion')
    expect(JSON.parse(String(body.mapping))).toEqual({ prompt: 'question+context', completion: 'response' })
    expect(body.name).toBe('qa')
    expect(body.file).toBeInstanceOf(File)
  })

  test('a stored dataset opens its page', async () => {
    serve(fetchMock, {
      'POST /api/datasets/detect': () => ({ body: { ...detection, validation: { ...detection.validation, error_count: 0, error_counts: {}, errors: [] } } }),
      'POST /api/datasets': () => ({ status: 201, body: { id: 'ds_new' } }),
    })
    const user = userEvent.setup()
    renderAt(<UploadPanel />, '/datasets/upload', '/datasets/upload')
    await user.upload(screen.getByLabelText('dataset file'), new File(['{}'], 'a.jsonl'))
    await user.click(await screen.findByRole('button', { name: 'Store dataset' }))
    await waitFor(() => expect(screen.getByTestId('navigated')).toHaveTextContent('/datasets/ds_new'))
  })

  test('errors in the check of the current mapping: Store dataset is disabled', async () => {
    const user = userEvent.setup()
    renderAt(<UploadPanel />, '/datasets/upload', '/datasets/upload')
    await user.upload(screen.getByLabelText('dataset file'), new File(['{}'], 'a.jsonl'))
    expect(await screen.findByText('8 problems')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Store dataset' })).toBeDisabled()
    expect(screen.getByText(/storing is possible once the check passes/)).toBeInTheDocument()
  })

  test('a file of no known kind is not "no problems": it was not checked, and the page says what to do', async () => {
    serve(fetchMock, {
      'POST /api/datasets/detect': () => ({
        body: { ...detection, kind: null, mapping: {}, suggestions: [], validation: { kind: null, mapping: {}, rows: 8, error_count: 0, error_counts: {}, errors: [] } },
      }),
    })
    const user = userEvent.setup()
    renderAt(<UploadPanel />, '/datasets/upload', '/datasets/upload')
    await user.upload(screen.getByLabelText('dataset file'), new File(['{}'], 'a.jsonl'))
    const validation = await screen.findByRole('region', { name: 'validation' })
    expect(within(validation).queryByText('no problems')).toBeNull()
    expect(within(validation).getByText('kind unknown: not checked')).toHaveClass('text-warn')
    expect(within(validation).getByText(/Choose the kind in step 3/)).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Store dataset' })).toBeDisabled()
  })
})
