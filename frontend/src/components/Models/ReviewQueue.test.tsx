// A review job's queue against a fake server that keeps the answers and reveals a pair's label
// and probabilities only once it is answered, as /api/jobs/{id}/review does
// (server/routes/reviews.py).
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { MemoryRouter, Route, Routes, useParams } from 'react-router-dom'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../Training/testing'
import type { Job } from '../Training/queries'
import { ReviewPanel, ReviewQueue } from './ReviewQueue'
import type { ReviewItem, ReviewSummary } from './review'

const fetchMock = vi.hoisted(() => {
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => fetchMock.mockReset())

const SUMMARY: ReviewSummary = {
  pairs: 40,
  committee: 3,
  queue_size: 2,
  unanimous: 0.825,
  calibration: {
    ece: 0.0431,
    confidence: 0.81,
    accuracy: 0.7,
    bins: [
      { low: 0.5, high: 0.6, pairs: 6, confidence: 0.55, accuracy: 0.5 },
      { low: 0.8, high: 0.9, pairs: 10, confidence: 0.85, accuracy: 0.6 },
      { low: 0.9, high: 1, pairs: 24, confidence: 0.96, accuracy: 0.92 },
    ],
  },
  checkpoints: [
    { weights: '/srv/runs/job_rm/engine/sampler_weights/000020', accuracy: 0.6 },
    { weights: '/srv/runs/job_rm/engine/sampler_weights/000040', accuracy: 0.675 },
    { weights: '/srv/runs/job_rm/engine/sampler_weights/000060', accuracy: 0.7 },
  ],
}

/** The server's rows: each with its hidden label and probabilities. */
const ROWS: ReviewItem[] = [
  {
    pair: 7, line: 8, prompt: [{ role: 'user', content: 'Is 91 prime?' }], a: 'Yes, 91 is prime.', b: 'No: 91 = 7 × 13.',
    uncertainty: 0.99, disagreement: 0.21, answer: null, label: 'a', p_a: [0.3, 0.55, 0.8], p_mean: 0.55,
  },
  {
    pair: 2, line: 3, prompt: [{ role: 'user', content: '3+4' }], a: '8', b: '7',
    uncertainty: 0.81, disagreement: 0.05, answer: null, label: 'b', p_a: [0.3, 0.25, 0.2], p_mean: 0.25,
  },
]

const blind = (row: ReviewItem, given: string | undefined): ReviewItem =>
  given === undefined ? { ...row, answer: null, label: null, p_a: null, p_mean: null } : { ...row, answer: given as ReviewItem['answer'] }

let seen: string[]
let sent: Record<string, unknown>
function serve({ summary = SUMMARY as ReviewSummary | null, dataset = { status: 201, body: VERSION as unknown } } = {}) {
  const given = new Map<number, string>()
  sent = {}
  seen = answer(fetchMock, {
    'GET /api/jobs/job_r/review': () => ({
      body: summary ? { summary, answered: given.size, data: ROWS.map((r) => blind(r, given.get(r.pair))) } : { summary: null, answered: 0, data: [] },
    }),
    'PUT /api/jobs/job_r/review/7': (_q, body) => answerPair(7, body),
    'PUT /api/jobs/job_r/review/2': (_q, body) => answerPair(2, body),
    'POST /api/jobs/job_r/review/dataset': (_q, body) => {
      sent.dataset = body
      return dataset
    },
    'GET /api/datasets': () => ({ body: { data: [{ id: 'ds_pairs', name: 'pairs', version: 1, kind: 'preferences', num_rows: 40 }], count: 1 } }),
    'POST /api/jobs': (_q, body) => {
      sent.job = body
      return { status: 201, body: job({ id: 'job_new', algorithm: 'rm', name: 'pairs-rm', state: 'queued' }) }
    },
  })
  function answerPair(pair: number, body: unknown) {
    sent[`answer ${pair}`] = body
    const choice = (body as { choice: string }).choice
    given.set(pair, choice)
    return { body: blind(ROWS.find((r) => r.pair === pair) as ReviewItem, choice) }
  }
}

const VERSION = { id: 'ds_pairs_v2', name: 'pairs (reviewed)', version: 2, kind: 'preferences', num_rows: 40, parent_id: 'ds_pairs' }

const reviewJob = (overrides: Record<string, unknown> = {}) =>
  job({
    id: 'job_r', algorithm: 'review', name: 'pairs-review', dataset_id: 'ds_pairs', parent_model_id: 'mdl_rm', base_model: 'thinker/tiny',
    state: 'succeeded', step: 3, total_steps: 3, config: {}, ...overrides,
  }) as Job

beforeEach(() => serve())

describe('the findings of a review', () => {
  test('the pairs, the committee, the unanimous share and each checkpoint\'s agreement with the labels', async () => {
    renderAt(<ReviewPanel job={reviewJob()} />, '/training/job_r')
    expect(await screen.findByTestId('review-facts')).toHaveTextContent('40 pairs scored by a committee of 3 checkpoints · 83% unanimous')
    expect(screen.getByTestId('checkpoint-0')).toHaveTextContent('step 20')
    expect(screen.getByTestId('checkpoint-0')).toHaveTextContent('60%')
    expect(screen.getByTestId('checkpoint-2')).toHaveTextContent('step 60')
    expect(screen.getByTestId('checkpoint-2')).toHaveTextContent('reviewed')
    expect(screen.getByTestId('checkpoint-1')).not.toHaveTextContent('reviewed')
  })

  test('the reliability table: a row per bin, its range, pairs, mean confidence and accuracy; the ECE', async () => {
    renderAt(<ReviewQueue job={reviewJob()} />, '/training/job_r')
    const table = await screen.findByRole('table', { name: 'reliability' })
    const rows = within(table).getAllByRole('row').slice(1)
    expect(rows).toHaveLength(3)
    expect(rows[0]).toHaveTextContent(/50–60%\s*6\s*55%\s*50%/)
    expect(rows[1]).toHaveTextContent(/80–90%\s*10\s*85%\s*60%/)
    expect(rows[2]).toHaveTextContent(/90–100%\s*24\s*96%\s*92%/)
    expect(screen.getByTestId('calibration')).toHaveTextContent('Calibration error (ECE) 0.043 · says 81% on average, right 70% of the time: overconfident')
  })

  test('before the job has finished: how far the committee has got', async () => {
    serve({ summary: null })
    renderAt(<ReviewQueue job={reviewJob({ state: 'running', step: 1 })} />, '/training/job_r')
    expect(await screen.findByText('No queue yet')).toBeInTheDocument()
    expect(screen.getByText(/1 of 3 done/)).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'A is better' })).toBeNull()
  })
})

describe('the queue', () => {
  test('least certain first, blind: no label and no probability before a pair is answered', async () => {
    renderAt(<ReviewQueue job={reviewJob()} />, '/training/job_r')
    const first = await screen.findByTestId('pair-7')
    expect(screen.getAllByTestId(/^pair-/).map((p) => p.dataset.testid)).toEqual(['pair-7', 'pair-2'])
    expect(first).toHaveTextContent('Is 91 prime?')
    expect(within(first).getByTestId('answer-a')).toHaveTextContent('Yes, 91 is prime.')
    expect(within(first).getByTestId('answer-b')).toHaveTextContent('No: 91 = 7 × 13.')
    expect(within(first).getByTestId('uncertainty')).toHaveTextContent('0.99')
    expect(within(first).getByTestId('disagreement')).toHaveTextContent('0.21')
    expect(screen.queryAllByTestId('reveal')).toEqual([])
    expect(screen.queryByText("the dataset's choice")).toBeNull()
    expect(screen.queryByText(/P\(A beats B\)/)).toBeNull()
    expect(screen.getByTestId('review-progress')).toHaveTextContent('0 / 2 answered')
  })

  test('answering PUTs the choice; the label and the model\'s P(A beats B) are revealed, mean and per checkpoint', async () => {
    renderAt(<ReviewQueue job={reviewJob()} />, '/training/job_r')
    const first = await screen.findByTestId('pair-7')
    await userEvent.click(within(first).getByRole('button', { name: 'B is better' }))
    await waitFor(() => expect(sent['answer 7']).toEqual({ choice: 'b' }))
    const reveal = await within(first).findByTestId('reveal')
    expect(reveal).toHaveTextContent('You disagreed with the dataset: it chose A.')
    expect(within(reveal).getByTestId('p-mean')).toHaveTextContent('55%')
    expect(reveal).toHaveTextContent("(the committee's mean) — it prefers A")
    expect(within(reveal).getByRole('list', { name: "each checkpoint's P(A beats B)" })).toHaveTextContent('step 20 30%step 40 55%step 60 (reviewed) 80%')
    expect(within(first).getByTestId('answer-a')).toHaveTextContent("the dataset's choice")
    expect(within(first).getByTestId('answer-b')).toHaveTextContent('your pick')
    expect(within(first).getByRole('button', { name: 'B is better' })).toHaveAttribute('aria-pressed', 'true')
    expect(screen.getByTestId('review-progress')).toHaveTextContent('1 / 2 answered')
    // the other pair stays blind
    expect(within(screen.getByTestId('pair-2')).queryByTestId('reveal')).toBeNull()

    // agreeing with the dataset on the second; a changed answer is sent again
    const second = screen.getByTestId('pair-2')
    await userEvent.click(within(second).getByRole('button', { name: 'B is better' }))
    expect(await within(second).findByTestId('reveal')).toHaveTextContent('You agreed with the dataset: it chose B.')
    await userEvent.click(within(second).getByRole('button', { name: 'Tie' }))
    await waitFor(() => expect(within(second).getByTestId('reveal')).toHaveTextContent('You called it a tie: it chose B.'))
    expect(sent['answer 2']).toEqual({ choice: 'tie' })
    expect(screen.getByTestId('review-progress')).toHaveTextContent('2 / 2 answered')
    expect(seen.filter((r) => r.startsWith('PUT'))).toEqual(['PUT /api/jobs/job_r/review/7', 'PUT /api/jobs/job_r/review/2', 'PUT /api/jobs/job_r/review/2'])
  })
})

/** The queue on a model's page, and the page a new job opens on. */
function renderWithJobPage(ui: React.ReactElement) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  function JobPageStub() {
    const { jobId } = useParams()
    return <p>the page of {jobId}</p>
  }
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={['/models/mdl_rm']}>
        <Routes>
          <Route path="/models/:id" element={ui} />
          <Route path="/training/:jobId" element={<JobPageStub />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

describe('the answers as a new dataset version', () => {
  test("the server's 409 is shown as it says, and no retrain is offered", async () => {
    const detail = "all 2 answer(s) agree with the dataset's labels: a new version would be the same rows"
    serve({ dataset: { status: 409, body: { detail } } })
    renderAt(<ReviewQueue job={reviewJob()} />, '/training/job_r')
    await userEvent.click(await screen.findByRole('button', { name: 'Add answers as a new dataset version' }))
    expect(await screen.findByTestId('version-message')).toHaveTextContent(detail)
    expect(sent.dataset).toEqual({})
    expect(screen.queryByRole('button', { name: 'Retrain the reward model on it' })).toBeNull()
  })

  test('a version made, the reward model is retrained on it from the reviewed model, and its job opens', async () => {
    renderWithJobPage(<ReviewQueue job={reviewJob()} />)
    const name = await screen.findByRole('textbox', { name: 'Version name' })
    await waitFor(() => expect(name).toHaveAttribute('placeholder', 'default: pairs (reviewed)'))
    await userEvent.type(name, 'pairs, checked')
    await userEvent.click(screen.getByRole('button', { name: 'Add answers as a new dataset version' }))
    expect(await screen.findByTestId('version-made')).toHaveTextContent('Made pairs (reviewed) v2 (40 pairs).')
    expect(sent.dataset).toEqual({ name: 'pairs, checked' })
    expect(screen.getByRole('link', { name: 'pairs (reviewed) v2' })).toHaveAttribute('href', '/datasets/ds_pairs_v2')
    await userEvent.click(screen.getByRole('button', { name: 'Retrain the reward model on it' }))
    expect(await screen.findByText('the page of job_new')).toBeInTheDocument()
    expect(sent.job).toEqual({ algorithm: 'rm', backend: 'local', base_model: 'mdl_rm', dataset_id: 'ds_pairs_v2', config: {} })
  })
})
