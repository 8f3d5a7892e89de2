import { cleanup, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { renderAt, serve, type Sent } from '../../components/Datasets/testing'
import { ModelListPage } from './ModelListPage'

// Node's Request needs an origin to resolve the client's relative URLs, as a page has.
const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(cleanup)

const model = (id: string, name: string, extra: Record<string, unknown> = {}) => ({
  id, name, job_id: 'job_1', dataset_id: 'ds_1', base_model: 'thinker/tiny', backend: 'local', step: 20,
  stage: null, sampler_path: `tinker://run/sampler_weights/${id}`, state_path: null,
  metrics: { step: 20, train_mean_nll: 5.0697, eval_mean_nll: 5.05451, learning_rate: 5e-5 },
  lifecycle: 'active', created_at: 1795672552.7, ...extra,
})

let lifecycle: string
let sent: Sent[]
beforeEach(() => {
  lifecycle = 'active'
  sent = serve(fetchMock, {
    'GET /api/models': () => ({
      body: { data: [model('mdl_a', 'reversal-sl@20', { lifecycle }), model('mdl_b', 'reversal-sl@10', { step: 10 })], count: 2 },
    }),
    'GET /api/datasets': () => ({ body: { data: [{ id: 'ds_1', name: 'reversal-train', version: 2 }], count: 1 } }),
    'PATCH /api/models/mdl_a': (s) => {
      lifecycle = (s.body as { lifecycle: string }).lifecycle
      return { body: { ...model('mdl_a', 'reversal-sl@20', { lifecycle }), lineage: {}, export: null } }
    },
  })
})

describe('ModelListPage', () => {
  test('the table shows each model with its lineage and key metrics', async () => {
    renderAt(<ModelListPage />, '/models', '/models')
    const row = (await screen.findByRole('link', { name: 'reversal-sl@20' })).closest('tr') as HTMLElement
    expect(within(row).getByText('thinker/tiny')).toBeInTheDocument()
    expect(within(row).getByRole('link', { name: 'reversal-train v2' })).toHaveAttribute('href', '/datasets/ds_1')
    expect(within(row).getByRole('link', { name: 'job_1' })).toHaveAttribute('href', '/training/job_1')
    expect(within(row).getByText('step 20')).toBeInTheDocument()
    expect(within(row).getByText('eval_mean_nll')).toBeInTheDocument()
    expect(within(row).getByText('5.055')).toBeInTheDocument()
    expect(within(row).getByRole('link', { name: /Playground/ })).toHaveAttribute('href', '/playground?model=mdl_a')
  })

  test('changing the lifecycle PATCHes the model and the table shows the new state', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models', '/models')
    const select = await screen.findByLabelText('lifecycle of reversal-sl@20')
    await user.selectOptions(select, 'deprecated')
    await waitFor(() => expect(sent.some((s) => s.method === 'PATCH')).toBe(true))
    const patch = sent.find((s) => s.method === 'PATCH')
    expect(patch?.path).toBe('/api/models/mdl_a')
    expect(patch?.body).toEqual({ lifecycle: 'deprecated' })
    await waitFor(() => expect(screen.getByLabelText('lifecycle of reversal-sl@20')).toHaveValue('deprecated'))
    expect(screen.getByLabelText('lifecycle of reversal-sl@20')).not.toBeDisabled()
  })

  test('the lifecycle filter goes to the server', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models', '/models')
    await user.selectOptions(await screen.findByLabelText('filter lifecycle'), 'archived')
    await waitFor(() => expect(sent.some((s) => s.path === '/api/models' && s.search.includes('lifecycle=archived'))).toBe(true))
  })

  test('ticking two models and pressing Compare opens the playground side by side', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models', '/models')
    await user.click(await screen.findByLabelText('compare reversal-sl@20'))
    await user.click(screen.getByLabelText('compare reversal-sl@10'))
    await user.click(screen.getByRole('button', { name: 'Compare' }))
    expect(screen.getByTestId('navigated')).toHaveTextContent('/playground?a=mdl_a&b=mdl_b')
  })
})
