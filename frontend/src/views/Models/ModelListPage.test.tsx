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

const LEADERBOARD = {
  dataset_id: 'ds_test',
  scorer: 'exact_match',
  jobs: ['job_ev', 'job_ev0'],
  leaderboard: [
    { key: 'mdl_a', id: 'mdl_a', name: 'reversal-sl@20', model: '/srv/w/20', score_mean: 0.62, job_id: 'job_ev', rank: 1, rating: 1180.4, strength: 2.8, wins: 150.5, games: 200 },
    { key: 'thinker/tiny', id: null, name: 'thinker/tiny', model: 'thinker/tiny', score_mean: 0.01, job_id: 'job_ev', rank: 2, rating: 819.6, strength: 0.35, wins: 49.5, games: 200 },
  ],
  unranked: [{ key: 'mdl_b', id: 'mdl_b', name: 'reversal-sl@10', model: '/srv/w/10', score_mean: 0.3, job_id: 'job_ev0' }],
}

let lifecycle: string
let sent: Sent[]
beforeEach(() => {
  lifecycle = 'active'
  sent = serve(fetchMock, {
    'GET /api/models': () => ({
      body: { data: [model('mdl_a', 'reversal-sl@20', { lifecycle }), model('mdl_b', 'reversal-sl@10', { step: 10 })], count: 2 },
    }),
    'GET /api/datasets': () => ({
      body: {
        data: [
          { id: 'ds_1', name: 'reversal-train', version: 2, kind: 'prompt_completion' },
          { id: 'ds_test', name: 'arithmetic-test', version: 1, kind: 'chat' },
          { id: 'ds_pairs', name: 'pairs', version: 1, kind: 'preferences' },
        ],
        count: 3,
      },
    }),
    'GET /api/jobs': () => ({ body: { data: [{ id: 'job_ev', algorithm: 'eval', state: 'succeeded', dataset_id: 'ds_test' }], count: 1 } }),
    'GET /api/models/leaderboard': (s) => {
      const q = new URLSearchParams(s.search)
      if (q.get('dataset_id') !== 'ds_test' || (q.get('scorer') ?? 'exact_match') !== 'exact_match') {
        return { status: 404, body: { detail: `no finished eval job on dataset ${q.get('dataset_id')}${q.get('scorer') ? ` scored by ${q.get('scorer')}` : ''}` } }
      }
      return { body: LEADERBOARD }
    },
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

describe('the leaderboard of an eval set', () => {
  test('the latest evaluated eval set by default: the ranking, the best marked, models linked', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models', '/models')
    await user.click(await screen.findByRole('tab', { name: 'Leaderboard' }))
    const best = await screen.findByTestId('rank-1')
    expect(within(best).getByText('★ best for this eval set')).toBeInTheDocument()
    expect(within(best).getByRole('link', { name: 'reversal-sl@20' })).toHaveAttribute('href', '/models/mdl_a')
    expect(best).toHaveTextContent('1180')
    expect(best).toHaveTextContent('150.5 / 200')
    expect(within(best).getByRole('link', { name: 'job_ev' })).toHaveAttribute('href', '/training/job_ev')
    const second = screen.getByTestId('rank-2')
    expect(within(second).queryByText(/best for this eval set/)).toBeNull()
    expect(within(second).queryByRole('link', { name: 'thinker/tiny' })).toBeNull()
    expect(screen.getByRole('link', { name: 'reversal-sl@10' })).toHaveAttribute('href', '/models/mdl_b')
    expect(screen.getByTestId('leaderboard-basis')).toHaveTextContent('From 2 finished eval jobs scored by exact_match')
    expect(sent.some((r) => r.path === '/api/models/leaderboard' && r.search === '?dataset_id=ds_test')).toBe(true)
    expect(sent.some((r) => r.path === '/api/jobs' && r.search.includes('algorithm=eval') && r.search.includes('state=succeeded'))).toBe(true)
    // the evaluated eval set first, then those an eval job can answer (not preference pairs)
    const choices = within(screen.getByLabelText('eval set')).getAllByRole('option').map((o) => o.textContent)
    expect(choices).toEqual(['arithmetic-test v1', 'reversal-train v2 · prompt_completion'])
  })

  test('no leaderboard: the server\'s reason is the empty state', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models?view=leaderboard&dataset=ds_test', '/models')
    expect(await screen.findByTestId('rank-1')).toBeInTheDocument()
    await user.selectOptions(screen.getByLabelText('scorer'), 'nll')
    expect(await screen.findByText('No leaderboard for this eval set')).toBeInTheDocument()
    expect(screen.getByTestId('leaderboard-missing')).toHaveTextContent('no finished eval job on dataset ds_test scored by nll.')
    await user.selectOptions(screen.getByLabelText('eval set'), 'ds_1')
    await waitFor(() => expect(screen.getByTestId('leaderboard-missing')).toHaveTextContent('no finished eval job on dataset ds_1.'))
    expect(screen.getByRole('link', { name: 'Evaluate models on it →' })).toHaveAttribute('href', '/training/new?algorithm=eval&dataset_id=ds_1')
  })
})

