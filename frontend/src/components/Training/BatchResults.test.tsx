// The results panel of a batch job against a fake server that filters, sorts and pages as
// GET /api/jobs/{id}/results does (server/routes/jobs.py, read_job_results).
import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { useUiStore } from '../../state/ui'
import { BatchResultsPanel } from './BatchResults'
import type { BatchRow, PoolActor } from './batch'
import type { Job } from './queries'
import { answer, job, renderAt } from './testing'

const fetchMock = vi.hoisted(() => {
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => {
  fetchMock.mockReset()
  useUiStore.setState({ token: '' })
})

const LONG = Array.from({ length: 8 }, (_, i) => `line ${i}: ${'x'.repeat(40)}`).join('\n')
const ROWS: BatchRow[] = [
  { index: 0, output: '7', confidence: 1, mean_logprob: -0.1, distinct_answers: 1, samples: 4, terminated: true, flagged: false, apply: true, reference: '7' },
  { index: 1, path: 'src/calc.py', output: LONG, confidence: 0.75, mean_logprob: -0.4, distinct_answers: 2, samples: 4, terminated: true, flagged: false, apply: true },
  { index: 2, output: 'maybe 8', confidence: 0.25, mean_logprob: -1.9, distinct_answers: 3, samples: 4, terminated: false, flagged: true, apply: false },
  { index: 3, error: 'RuntimeError: CUDA out of memory (3 tries)' },
]
const COUNTS = { answered: 3, failed: 1, flagged: 1, applied: 2, verified: 0, verification_failed: 0 }
const ACTORS: PoolActor[] = [
  { id: 0, state: 'busy', pid: 101, node: 'host-a', shard: 2, shards_done: 1, lost_reason: null },
  { id: 1, state: 'lost', pid: 102, node: 'host-b', shard: null, shards_done: 0, lost_reason: 'the actor exited with code -9' },
]
const METRICS = [
  { step: 1, inputs_done: 2, inputs_total: 8, answered: 2, mean_confidence: 1 },
  { step: 2, inputs_done: 4, inputs_total: 8, answered: 3, mean_confidence: 2 / 3 },
]

/** The server's filter, order and page over `rows`. */
function page(rows: readonly BatchRow[], q: URLSearchParams) {
  const flagged = q.get('flagged')
  let out = flagged === null ? [...rows] : rows.filter((r) => r.error === undefined && String(r.flagged === true) === flagged)
  const order = q.get('order') ?? 'index'
  out.sort((a, b) => (order === 'index' ? a.index - b.index : (a.confidence ?? -1) - (b.confidence ?? -1) || a.index - b.index))
  if (order === '-confidence') out = out.reverse()
  const offset = Number(q.get('offset') ?? 0)
  return { total: out.length, data: out.slice(offset, offset + Number(q.get('limit') ?? 100)) }
}

let seen: string[]
function serve(rows: readonly BatchRow[] = ROWS, counts: Record<string, number> = COUNTS, actors: PoolActor[] = ACTORS) {
  seen = answer(fetchMock, {
    'GET /api/jobs/job_1/results': (q) => ({ body: { ...page(rows, q), counts, actors } }),
    'GET /api/jobs/job_1/metrics': () => ({ body: { data: METRICS, count: METRICS.length, next_offset: null } }),
    'GET /api/jobs/job_1/results/download': () => ({ body: rows[0] }),
  })
}

const batchJob = (overrides: Record<string, unknown> = {}) =>
  job({ algorithm: 'batch', name: 'arith-batch', config: { task: 'answer', samples: 4 }, step: 2, total_steps: 4, ...overrides }) as Job

const shownRows = () => screen.getAllByTestId(/^result-/).map((r) => r.dataset.testid)
const asked = (part: string) => seen.some((r) => r.startsWith('GET /api/jobs/job_1/results?') && r.includes(part))

beforeEach(() => serve())

describe('the results of a batch job', () => {
  test('the counts, each input with its output, confidence and state, and the pool', async () => {
    renderAt(<BatchResultsPanel job={batchJob()} />, '/training/job_1')
    expect(await screen.findByTestId('count-answered')).toHaveTextContent('3')
    expect(screen.getByText('of 8 inputs')).toBeInTheDocument()
    expect(screen.getByTestId('count-failed')).toHaveTextContent('1')
    expect(screen.getByTestId('count-flagged')).toHaveTextContent('1')
    expect(screen.getByTestId('count-applied')).toHaveTextContent('2')
    // the last shard's metrics row
    expect(screen.getByTestId('count-mean_confidence')).toHaveTextContent('67%')
    // no fix task: no verification count
    expect(screen.queryByTestId('count-verified')).toBeNull()
    expect(screen.getByText(/Below 50% it is flagged/)).toBeInTheDocument()

    expect(shownRows()).toEqual(['result-0', 'result-1', 'result-2', 'result-3'])
    const sure = screen.getByTestId('result-0')
    expect(sure).toHaveTextContent('#0')
    expect(sure).toHaveTextContent('100%')
    expect(within(sure).getByText('apply')).toBeInTheDocument()
    expect(within(sure).getByTitle('4 of 4 samples agree · 1 distinct answer · mean logprob -0.10')).toBeInTheDocument()
    const unsure = screen.getByTestId('result-2')
    expect(unsure).toHaveTextContent('25%')
    expect(within(unsure).getByText('flagged')).toBeInTheDocument()
    expect(within(unsure).getByText('cut off')).toBeInTheDocument()
    expect(within(unsure).queryByText('apply')).toBeNull()
    const failed = screen.getByTestId('result-3')
    expect(failed).toHaveTextContent('RuntimeError: CUDA out of memory (3 tries)')
    expect(within(failed).getByText('failed')).toBeInTheDocument()

    // a long output is clipped until expanded
    const file = screen.getByTestId('result-1')
    expect(file).toHaveTextContent('src/calc.py')
    expect(file).not.toHaveTextContent('line 7')
    await userEvent.click(within(file).getByRole('button', { name: 'more' }))
    expect(file).toHaveTextContent('line 7')
    // expanded, a row shows its reference
    await userEvent.click(within(sure).getByRole('button', { name: 'more' }))
    expect(sure).toHaveTextContent('reference 7')

    expect(screen.getByText('Pool · 2 actors')).toBeInTheDocument()
    expect(within(screen.getByRole('list', { name: 'pool' })).getAllByRole('listitem')).toHaveLength(2)
    expect(screen.getByTestId('actor-0')).toHaveTextContent('busy')
    expect(screen.getByTestId('actor-0')).toHaveTextContent('host-a · pid 101 · 1 shard done · on shard 2')
    expect(screen.getByTestId('actor-1')).toHaveTextContent('lost')
    expect(screen.getByTestId('actor-1')).toHaveTextContent('the actor exited with code -9')
  })

  test('flagged or not, and by confidence: the server is asked, the page follows', async () => {
    const user = userEvent.setup()
    renderAt(<BatchResultsPanel job={batchJob()} />, '/training/job_1')
    await screen.findByTestId('result-3')
    expect(asked('order=index&offset=0&limit=50')).toBe(true)

    await user.click(screen.getByRole('tab', { name: 'Flagged' }))
    await waitFor(() => expect(shownRows()).toEqual(['result-2']))
    expect(asked('flagged=true')).toBe(true)
    // the counts are over every row, whatever the filter
    expect(screen.getByTestId('count-answered')).toHaveTextContent('3')

    await user.click(screen.getByRole('tab', { name: 'Not flagged' }))
    await waitFor(() => expect(shownRows()).toEqual(['result-0', 'result-1']))
    expect(asked('flagged=false')).toBe(true)

    await user.click(screen.getByRole('tab', { name: 'All' }))
    await user.selectOptions(screen.getByLabelText('Sort results'), 'confidence')
    await waitFor(() => expect(shownRows()).toEqual(['result-3', 'result-2', 'result-1', 'result-0']))
    expect(asked('order=confidence')).toBe(true)
    await user.selectOptions(screen.getByLabelText('Sort results'), '-confidence')
    await waitFor(() => expect(shownRows()).toEqual(['result-0', 'result-1', 'result-2', 'result-3']))
  })

  test('50 rows a page', async () => {
    const many = Array.from({ length: 120 }, (_, index) => ({ index, output: `answer ${index}`, confidence: 1, samples: 4, flagged: false, apply: true }))
    serve(many, { ...COUNTS, answered: 120, failed: 0, flagged: 0, applied: 120 })
    renderAt(<BatchResultsPanel job={batchJob()} />, '/training/job_1')
    expect(await screen.findByTestId('results-range')).toHaveTextContent('1–50 of 120')
    expect(screen.getAllByTestId(/^result-/)).toHaveLength(50)
    expect(screen.getByRole('button', { name: '← Previous' })).toBeDisabled()
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }))
    await waitFor(() => expect(screen.getByTestId('results-range')).toHaveTextContent('51–100 of 120'))
    expect(asked('offset=50&limit=50')).toBe(true)
    expect(screen.getByTestId('result-50')).toHaveTextContent('answer 50')
  })

  test('Download JSONL: a link to the file, fetched with the API token', async () => {
    useUiStore.setState({ token: 'tok_1' })
    // jsdom has no blob URLs: the browser's part of saving a file is stood in for
    const createObjectURL = vi.fn(() => 'blob:results')
    Object.assign(URL, { createObjectURL, revokeObjectURL: vi.fn() })
    const click = vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(() => {})
    renderAt(<BatchResultsPanel job={batchJob()} />, '/training/job_1')
    const link = await screen.findByRole('link', { name: 'Download JSONL' })
    expect(link).toHaveAttribute('href', '/api/jobs/job_1/results/download')
    await userEvent.click(link)
    await waitFor(() => expect(click).toHaveBeenCalled())
    const call = fetchMock.mock.calls.find(([input]) => String(input) === '/api/jobs/job_1/results/download')
    expect(call?.[1]).toEqual({ headers: { Authorization: 'Bearer tok_1' } })
    expect(createObjectURL).toHaveBeenCalled()
    click.mockRestore()
  })

  test('a fix: how many fixes passed their tests, and each one\'s verdict', async () => {
    const fixes: BatchRow[] = [
      { index: 0, path: 'a.py', output: '```python\nx = 1\n```', fix: 'x = 1', confidence: 1, samples: 2, flagged: false, apply: true, verified: true, verification: 'the tests passed' },
      { index: 1, path: 'b.py', output: '```python\nx = 2\n```', fix: 'x = 2', confidence: 1, samples: 2, flagged: false, apply: false, verified: false, verification: 'the tests failed: AssertionError' },
    ]
    serve(fixes, { answered: 2, failed: 0, flagged: 0, applied: 1, verified: 1, verification_failed: 1 })
    renderAt(<BatchResultsPanel job={batchJob({ config: { task: 'fix' } })} />, '/training/job_1')
    expect(await screen.findByTestId('count-verified')).toHaveTextContent('1')
    expect(screen.getByText('1 failed their tests')).toBeInTheDocument()
    expect(within(screen.getByTestId('result-0')).getByText('tests passed')).toBeInTheDocument()
    const failed = screen.getByTestId('result-1')
    expect(within(failed).getByText('tests failed')).toBeInTheDocument()
    expect(within(failed).getByText('not applied')).toBeInTheDocument()
    await userEvent.click(within(failed).getByRole('button', { name: 'more' }))
    expect(failed).toHaveTextContent('the tests failed: AssertionError')
  })

  test('nothing answered yet: what comes next, and the pool starting', async () => {
    serve([], { answered: 0, failed: 0, flagged: 0, applied: 0, verified: 0, verification_failed: 0 }, [])
    renderAt(<BatchResultsPanel job={batchJob({ step: 0 })} />, '/training/job_1')
    expect(await screen.findByText('No results yet')).toBeInTheDocument()
    expect(screen.getByText(/appear here as soon as an actor finishes it/)).toBeInTheDocument()
    expect(screen.queryByRole('link', { name: 'Download JSONL' })).toBeNull()
    expect(screen.getByText(/The pool of actors starts/)).toBeInTheDocument()
  })
})
