// The evaluation panel of an eval job against a fake server that filters, sorts and pages as
// GET /api/jobs/{id}/evaluation does (services/evaluations.py, samples_page).
import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { useUiStore } from '../../state/ui'
import { EvaluationPanel } from './Evaluation'
import type { EvalSampleRow, EvalSummary } from './evaluation'
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

const SUMMARY: EvalSummary = {
  dataset: '/srv/datasets/ds_test.jsonl',
  prompts: 4,
  scorer: 'exact_match',
  samples: 1,
  temperature: 0,
  alpha: 0.05,
  models: [
    { name: 'thinker/tiny', model: 'thinker/tiny', id: null, score_mean: -0.076, score_interval: [-0.098, -0.045], nll_mean: 5.9575, prompts: 4, terminated_rate: 0.04 },
    { name: 'arith-sl@100', model: '/srv/runs/job_0/sampler_weights/000100', id: 'mdl_a', score_mean: 0.75, score_interval: [0.5, 1], nll_mean: 0.2999, prompts: 4, terminated_rate: 1 },
    { name: 'arith-sl@20', model: '/srv/runs/job_0/sampler_weights/000020', id: 'mdl_b', score_mean: 0.1, score_interval: [0, 0.25], nll_mean: 1.6245, prompts: 4, terminated_rate: 0 },
  ],
  comparisons: [
    {
      a: 'thinker/tiny', b: 'arith-sl@100', n: 200, wins: 120, ties: 12, losses: 68, win_rate: 0.63, interval: [0.58, 0.7], p_value: 0.0004, significant: true,
      verdict: 'arith-sl@100 is better: 63% win rate [58%, 70%], p = 0.0004, n = 200 (12 ties, left out of the sign test)',
    },
    {
      a: 'thinker/tiny', b: 'arith-sl@20', n: 200, wins: 60, ties: 80, losses: 60, win_rate: 0.5, interval: [0.44, 0.56], p_value: 1, significant: false,
      verdict: "No significant difference between thinker/tiny and arith-sl@20: arith-sl@20's 50% win rate [44%, 56%], p = 1.00, n = 200 (80 ties, left out of the sign test)",
    },
    {
      a: 'arith-sl@100', b: 'arith-sl@20', n: 200, wins: 10, ties: 20, losses: 170, win_rate: 0.1, interval: [0.06, 0.14], p_value: 0.00001, significant: true,
      verdict: 'arith-sl@100 is better: 90% win rate [86%, 94%], p < 0.0001, n = 200 (20 ties, left out of the sign test)',
    },
  ],
  leaderboard: [
    { model: 'arith-sl@100', rank: 1, rating: 1438.41, strength: 12.47, wins: 196.5, games: 200 },
    { model: 'thinker/tiny', rank: 2, rating: 796.49, strength: 0.31, wins: 56.5, games: 200 },
    { model: 'arith-sl@20', rank: 3, rating: 765.09, strength: 0.26, wins: 47, games: 200 },
  ],
}

const row = (index: number, prompt: string, reference: string, scores: [number | null, number | null, number | null], texts: [string, string, string]): EvalSampleRow => ({
  index,
  prompt,
  reference,
  disagree: new Set(scores).size > 1,
  answers: SUMMARY.models.map((m, i) => ({
    model: m.name, score: scores[i], nll: 1 + i, nll_tokens: 10, answers: [texts[i]], scores: [scores[i]], terminated: [texts[i] !== ''],
  })),
})
const ROWS: EvalSampleRow[] = [
  row(0, '3+4', '7', [0, 1, 0], ['34', '7', '']),
  row(1, '2+2', '4', [1, 1, 1], ['4', '4', '4']),
  row(2, '9+1', '10', [-0.1, 1, 0], ['<extra_id_38>', '10', '1']),
  row(3, '5+5', '10', [0, 0, 1], ['55', '1', '10']),
]

/** The server's filter, order and page over `rows`. */
function page(rows: readonly EvalSampleRow[], q: URLSearchParams) {
  const disagree = q.get('disagree')
  let out = disagree === null ? [...rows] : rows.filter((r) => String(r.disagree) === disagree)
  const order = q.get('order') ?? 'index'
  const model = q.get('model') ?? SUMMARY.models.at(-1)?.name
  const score = (r: EvalSampleRow) => r.answers.find((a) => a.model === model)?.score ?? -Infinity
  const spread = (r: EvalSampleRow) => {
    const s = r.answers.map((a) => a.score ?? 0)
    return Math.max(...s) - Math.min(...s)
  }
  if (order.endsWith('score')) out.sort((a, b) => score(a) - score(b) || a.index - b.index)
  else if (order.endsWith('spread')) out.sort((a, b) => spread(a) - spread(b) || a.index - b.index)
  if (order.startsWith('-')) out = out.reverse()
  const offset = Number(q.get('offset') ?? 0)
  return { total: out.length, data: out.slice(offset, offset + Number(q.get('limit') ?? 100)) }
}

let seen: string[]
function serve(summary: EvalSummary | null = SUMMARY, rows: readonly EvalSampleRow[] = ROWS) {
  seen = answer(fetchMock, {
    'GET /api/jobs/job_1/evaluation': (q) => ({ body: summary ? { summary, ...page(rows, q) } : { summary: null, total: 0, data: [] } }),
    'GET /api/jobs/job_1/evaluation/download': () => ({ body: rows[0] }),
  })
}

const evalJob = (overrides: Record<string, unknown> = {}) =>
  job({
    algorithm: 'eval', name: 'arith-eval', dataset_id: 'ds_test', state: 'succeeded', step: 3, total_steps: 3,
    config: { models: [{ model: 'thinker/tiny' }, { model: '/srv/a', name: 'arith-sl@100', id: 'mdl_a' }, { model: '/srv/b', name: 'arith-sl@20', id: 'mdl_b' }] },
    ...overrides,
  }) as Job

const shownRows = () => screen.getAllByTestId(/^sample-/).map((r) => r.dataset.testid)
const asked = (part: string) => seen.some((r) => r.startsWith('GET /api/jobs/job_1/evaluation?') && r.includes(part))

beforeEach(() => serve())

describe('the evaluation of an eval job', () => {
  test('each model with its score, interval, NLL and finished answers; library models link to their page', async () => {
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const base = await screen.findByTestId('model-0')
    expect(base).toHaveTextContent('thinker/tiny')
    expect(base).toHaveTextContent('baseline')
    expect(base).toHaveTextContent('-0.076 [-0.098, -0.045]')
    expect(base).toHaveTextContent('5.96')
    expect(base).toHaveTextContent('4%')
    expect(within(base).queryByRole('link')).toBeNull()
    const tuned = screen.getByTestId('model-1')
    expect(within(tuned).getByRole('link', { name: 'arith-sl@100' })).toHaveAttribute('href', '/models/mdl_a')
    expect(tuned).toHaveTextContent('0.75 [0.5, 1]')
    expect(tuned).toHaveTextContent('100%')
    expect(screen.getByTestId('evaluation-facts')).toHaveTextContent('4 prompts · scored by exact_match · 1 answer a prompt at temperature 0 · α = 0.05')
    expect(screen.getByRole('link', { name: 'Leaderboard of this eval set →' })).toHaveAttribute('href', '/models?view=leaderboard&dataset=ds_test')
  })

  test('a significant comparison and one that is not: the verdict, the outcomes, the win rate on its axis, the p-value', async () => {
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const better = await screen.findByTestId('comparison-0')
    expect(within(better).getByTestId('verdict')).toHaveTextContent('arith-sl@100 is better: 63% win rate [58%, 70%], p = 0.0004, n = 200 (12 ties, left out of the sign test)')
    expect(within(better).getByTestId('verdict')).toHaveClass('text-ok')
    expect(within(better).getByText('significant')).toBeInTheDocument()
    expect(within(better).getByTestId('outcomes')).toHaveTextContent('B won 120' + '12 ties' + 'B lost 68')
    expect(within(better).getByRole('img', { name: 'B won 120, 12 ties, B lost 68' })).toBeInTheDocument()
    expect(within(better).getByRole('img', { name: "B's win rate 63%, 95% interval 58% to 70%" })).toBeInTheDocument()
    expect(within(better).getByTestId('interval-band')).toHaveStyle({ left: '58%', width: '12%' })
    expect(within(better).getByTestId('p-value')).toHaveTextContent('p = 0.0004')
    expect(within(better).getByText('50%')).toBeInTheDocument()

    const same = screen.getByTestId('comparison-1')
    expect(within(same).getByTestId('verdict')).toHaveTextContent(/^No significant difference between thinker\/tiny and arith-sl@20/)
    expect(within(same).getByTestId('verdict')).toHaveClass('text-neutral-100')
    expect(within(same).getByText('not significant')).toBeInTheDocument()
    expect(within(same).queryByText('significant')).toBeNull()
    expect(within(same).getByTestId('p-value')).toHaveTextContent('p = 1.00')
    expect(within(same).getByTestId('win-rate')).toHaveTextContent('50%')

    // A better than B: said in red, from B's side
    const worse = screen.getByTestId('comparison-2')
    expect(within(worse).getByTestId('verdict')).toHaveClass('text-bad')
    expect(within(worse).getByTestId('p-value')).toHaveTextContent('p < 0.0001')
  })

  test('the job\'s leaderboard: rank, model (linked), rating, wins / games', async () => {
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const first = await screen.findByTestId('rank-1')
    expect(within(first).getByRole('link', { name: 'arith-sl@100' })).toHaveAttribute('href', '/models/mdl_a')
    expect(first).toHaveTextContent('1438')
    expect(first).toHaveTextContent('196.5 / 200')
    expect(screen.getByTestId('rank-2')).toHaveTextContent('thinker/tiny796')
    expect(screen.getByTestId('rank-3')).toHaveTextContent('47 / 200')
  })

  test('every model\'s answer side by side; the best and the worst of a disagreement marked', async () => {
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const first = await screen.findByTestId('sample-0')
    expect(first).toHaveTextContent('3+4')
    expect(first).toHaveTextContent('reference 7')
    expect(first).toHaveTextContent('disagree')
    const cells = within(first).getAllByRole('cell').slice(1)
    expect(cells.map((c) => c.dataset.tone)).toEqual(['worst', 'best', 'worst'])
    expect(cells[1]).toHaveTextContent('7')
    expect(cells[2]).toHaveTextContent('(empty)')
    expect(within(cells[2]).getByText('cut off')).toBeInTheDocument()
    // all agree: nothing marked
    const agreed = screen.getByTestId('sample-1')
    expect(within(agreed).getAllByRole('cell').slice(1).map((c) => c.dataset.tone)).toEqual(['same', 'same', 'same'])
    expect(within(agreed).queryByText('disagree')).toBeNull()
  })

  test('a model as judge: each answer shows the reply its grade was read from', async () => {
    const judged = ROWS.map((r) => ({ ...r, answers: r.answers.map((a) => ({ ...a, judge_replies: [a.score === 1 ? '10' : 'Grade: 3'] })) }))
    serve(SUMMARY, judged)
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const first = await screen.findByTestId('sample-0')
    expect(within(first).getAllByTestId('judge-reply').map((r) => r.textContent)).toEqual(['judge: Grade: 3', 'judge: 10', 'judge: Grade: 3'])
  })

  test('sorted by a model\'s worst or best, by disagreement; disagreeing or agreeing: the server is asked', async () => {
    const user = userEvent.setup()
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    await screen.findByTestId('sample-3')
    expect(shownRows()).toEqual(['sample-0', 'sample-1', 'sample-2', 'sample-3'])
    expect(asked('order=index&offset=0&limit=50')).toBe(true)

    await user.selectOptions(screen.getByLabelText('Sort prompts'), 'worst')
    // the last model unless another is chosen (the server's default)
    expect(screen.getByLabelText('Sort by the scores of')).toHaveValue('arith-sl@20')
    await waitFor(() => expect(shownRows()).toEqual(['sample-0', 'sample-2', 'sample-1', 'sample-3']))
    expect(asked('order=score&')).toBe(true)
    await user.selectOptions(screen.getByLabelText('Sort by the scores of'), 'thinker/tiny')
    await waitFor(() => expect(shownRows()).toEqual(['sample-2', 'sample-0', 'sample-3', 'sample-1']))
    expect(asked('order=score&model=thinker%2Ftiny')).toBe(true)
    await user.selectOptions(screen.getByLabelText('Sort prompts'), 'best')
    await waitFor(() => expect(shownRows()).toEqual(['sample-1', 'sample-3', 'sample-0', 'sample-2']))
    expect(asked('order=-score&model=thinker%2Ftiny')).toBe(true)
    await user.selectOptions(screen.getByLabelText('Sort prompts'), 'spread')
    await waitFor(() => expect(shownRows()).toEqual(['sample-2', 'sample-3', 'sample-0', 'sample-1']))
    expect(asked('order=-spread')).toBe(true)

    await user.click(screen.getByRole('tab', { name: 'Agree' }))
    await waitFor(() => expect(shownRows()).toEqual(['sample-1']))
    expect(asked('disagree=false')).toBe(true)
    await user.click(screen.getByRole('tab', { name: 'Disagree' }))
    await waitFor(() => expect(shownRows()).toEqual(['sample-2', 'sample-3', 'sample-0']))
    expect(asked('disagree=true')).toBe(true)
  })

  test('50 prompts a page', async () => {
    const many = Array.from({ length: 120 }, (_, i) => row(i, `${i}+0`, String(i), [0, 1, 1], ['x', String(i), String(i)]))
    serve(SUMMARY, many)
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    expect(await screen.findByTestId('results-range')).toHaveTextContent('1–50 of 120')
    expect(screen.getAllByTestId(/^sample-/)).toHaveLength(50)
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }))
    await waitFor(() => expect(screen.getByTestId('results-range')).toHaveTextContent('51–100 of 120'))
    expect(asked('offset=50&limit=50')).toBe(true)
    expect(screen.getByTestId('sample-50')).toHaveTextContent('50+0')
  })

  test('Download JSONL: the samples, fetched with the API token', async () => {
    useUiStore.setState({ token: 'tok_1' })
    const createObjectURL = vi.fn(() => 'blob:samples')
    Object.assign(URL, { createObjectURL, revokeObjectURL: vi.fn() })
    const click = vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(() => {})
    renderAt(<EvaluationPanel job={evalJob()} />, '/training/job_1')
    const link = await screen.findByRole('link', { name: 'Download JSONL' })
    expect(link).toHaveAttribute('href', '/api/jobs/job_1/evaluation/download')
    await userEvent.click(link)
    await waitFor(() => expect(click).toHaveBeenCalled())
    const call = fetchMock.mock.calls.find(([input]) => String(input) === '/api/jobs/job_1/evaluation/download')
    expect(call?.[1]).toEqual({ headers: { Authorization: 'Bearer tok_1' } })
    click.mockRestore()
  })

  test('before the summary: which models have answered, and no figures', async () => {
    serve(null)
    renderAt(<EvaluationPanel job={evalJob({ state: 'running', step: 1 })} />, '/training/job_1')
    expect(await screen.findByText('No evaluation yet')).toBeInTheDocument()
    expect(screen.getByText(/\(1 of 3 done\)/)).toBeInTheDocument()
    expect(screen.getByRole('list', { name: 'models evaluated' })).toHaveTextContent('✓ A thinker/tiny' + 'arith-sl@100' + 'arith-sl@20')
    expect(screen.queryByTestId('verdict')).toBeNull()
    expect(screen.queryByRole('link', { name: 'Download JSONL' })).toBeNull()
  })

  test('an eval job that ended without one says so', async () => {
    serve(null)
    renderAt(<EvaluationPanel job={evalJob({ state: 'failed', step: 1 })} />, '/training/job_1')
    expect(await screen.findByText(/ended before every model had answered/)).toBeInTheDocument()
  })
})
