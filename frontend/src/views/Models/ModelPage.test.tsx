// A model's page against a fake server: a reward model's reviews (start one, list them, the
// queue of the newest finished); other models have none.
import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../../components/Training/testing'
import { ModelPage } from './ModelPage'

const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => fetchMock.mockReset())

const model = (extra: Record<string, unknown> = {}) => ({
  id: 'mdl_rm', name: 'pairs-rm@60', job_id: 'job_rm', dataset_id: 'ds_pairs', base_model: 'thinker/tiny', backend: 'local', step: 60,
  stage: 'rm', sampler_path: 'tinker://run/sampler_weights/000060', state_path: null, metrics: { rm_eval_accuracy: 0.7 },
  lifecycle: 'active', created_at: 1795672552.7, export: null,
  lineage: { base_model: 'thinker/tiny', dataset: { id: 'ds_pairs', name: 'pairs' }, job: null, metrics: {}, parent_model: null, stage: 'rm', step: 60 },
  ...extra,
})

const DATASETS = [
  { id: 'ds_chat', name: 'chat', version: 1, kind: 'chat', num_rows: 10 },
  { id: 'ds_pairs', name: 'pairs', version: 1, kind: 'preferences', num_rows: 40 },
  { id: 'ds_heldout', name: 'pairs-heldout', version: 1, kind: 'preferences', num_rows: 12 },
]

const review = (id: string, state: string, created: string) =>
  job({ id, name: `${id}-review`, algorithm: 'review', state, dataset_id: 'ds_pairs', parent_model_id: 'mdl_rm', created_at: created, config: {} })

let sent: unknown
function serve(detail = model(), reviews = [review('job_r3', 'running', '2026-01-03T00:00:00Z'), review('job_r2', 'succeeded', '2026-01-02T00:00:00Z')]) {
  sent = undefined
  return answer(fetchMock, {
    'GET /api/models/mdl_rm': () => ({ body: detail }),
    'GET /api/models': () => ({ body: { data: [], count: 0 } }),
    'GET /api/datasets': () => ({ body: { data: DATASETS, count: DATASETS.length } }),
    'GET /api/jobs': () => ({ body: { data: reviews, count: reviews.length } }),
    'GET /api/jobs/job_r2/review': () => ({
      body: {
        summary: {
          pairs: 40, committee: 2, queue_size: 1, unanimous: 0.9,
          calibration: { ece: 0.05, confidence: 0.8, accuracy: 0.75, bins: [{ low: 0.9, high: 1, pairs: 40, confidence: 0.8, accuracy: 0.75 }] },
          checkpoints: [{ weights: '/w/000040', accuracy: 0.7 }, { weights: '/w/000060', accuracy: 0.75 }],
        },
        answered: 0,
        data: [{ pair: 3, line: 4, prompt: [{ role: 'user', content: 'Is 91 prime?' }], a: 'yes', b: 'no', uncertainty: 0.97, disagreement: 0.2, answer: null, label: null, p_a: null, p_mean: null }],
      },
    }),
    'GET /api/jobs/job_r3/review': () => ({ body: { summary: null, answered: 0, data: [] } }),
    'POST /api/jobs': (_q, body) => {
      sent = body
      return { status: 201, body: review('job_r4', 'queued', '2026-01-04T00:00:00Z') }
    },
  })
}

describe("a reward model's page", () => {
  test("lists its reviews and shows the newest finished one's queue", async () => {
    const seen = serve()
    renderAt(<ModelPage />, '/models/mdl_rm', '/models/:id')
    const reviews = await screen.findByRole('table', { name: 'reviews' })
    expect(seen).toContain('GET /api/jobs?algorithm=review&parent_model_id=mdl_rm&limit=200')
    expect(within(reviews).getByTestId('review-job_r3')).toHaveTextContent('running')
    expect(within(reviews).getByTestId('review-job_r2')).toHaveTextContent('succeeded')
    expect(within(reviews).getByTestId('review-job_r2')).toHaveTextContent('shown below')
    expect(await screen.findByTestId('pair-3')).toHaveTextContent('Is 91 prime?')
    expect(screen.getByRole('table', { name: 'reliability' })).toHaveTextContent('90–100%')

    // the running one: its queue is on its way
    await userEvent.click(within(reviews).getByRole('button', { name: 'Show its queue' }))
    expect(await screen.findByText('No queue yet')).toBeInTheDocument()
    expect(screen.queryByTestId('pair-3')).toBeNull()
  })

  test('starts a review of the model on a preferences dataset, with the committee asked for', async () => {
    serve(model(), [])
    renderAt(<ModelPage />, '/models/mdl_rm', '/models/:id')
    expect(await screen.findByText('No review yet')).toBeInTheDocument()
    const form = screen.getByRole('form', { name: 'start a review' })
    const start = within(form).getByRole('button', { name: 'Start a review' })
    expect(start).toBeDisabled()
    const dataset = within(form).getByLabelText(/Preference pairs/, { selector: 'select' })
    // preferences datasets only
    expect(within(dataset).getAllByRole('option').map((o) => o.textContent)).toEqual(['Choose a dataset…', 'pairs v1 · preferences · 40 rows', 'pairs-heldout v1 · preferences · 12 rows'])
    await userEvent.selectOptions(dataset, 'ds_heldout')
    const committee = within(form).getByLabelText(/Committee/, { selector: 'input' })
    expect(committee).toHaveAttribute('placeholder', 'default: 3')
    await userEvent.type(committee, '9')
    expect(await within(form).findByText('Must be at most 8.')).toBeInTheDocument()
    expect(start).toBeDisabled()
    await userEvent.clear(committee)
    await userEvent.type(committee, '2')
    await userEvent.click(start)
    await waitFor(() => expect(sent).toEqual({ algorithm: 'review', backend: 'local', base_model: 'mdl_rm', dataset_id: 'ds_heldout', config: { committee: 2 } }))
  })

  test('a model that is not a reward model has no review, and trains further rather than retrains', async () => {
    serve(model({ stage: null, lineage: { ...model().lineage, stage: null } }))
    renderAt(<ModelPage />, '/models/mdl_rm', '/models/:id')
    expect(await screen.findByRole('heading', { name: 'pairs-rm@60' })).toBeInTheDocument()
    expect(screen.queryByRole('heading', { name: 'Review' })).toBeNull()
    expect(screen.getByRole('link', { name: 'Train further' })).toBeInTheDocument()
    expect(screen.queryByRole('link', { name: 'Retrain' })).toBeNull()
  })

  test("a reward model's Retrain opens the new-job form of an rm job from it", async () => {
    serve()
    renderAt(<ModelPage />, '/models/mdl_rm', '/models/:id')
    expect(await screen.findByRole('link', { name: 'Retrain' })).toHaveAttribute('href', '/training/new?algorithm=rm&base_model=mdl_rm&backend=local')
    expect(screen.getByRole('heading', { name: 'Review' })).toBeInTheDocument()
  })
})
