import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { useBlind } from '../../components/Playground/blind'
import { useFeedbackTarget } from '../../components/Playground/feedbackTarget'
import { renderAt, servePlayground, type Sent } from '../../components/Playground/testing'
import { PlaygroundView } from './PlaygroundView'

// The client captures fetch when it is created, so the mock must exist before any import.
const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

const model = (id: string, name: string, extra: Record<string, unknown> = {}) => ({
  id, name, job_id: 'job_1', dataset_id: 'ds_1', base_model: 'thinker/tiny', backend: 'local', step: 20, stage: null,
  sampler_path: `tinker://run/sampler_weights/${id}`, state_path: null, metrics: {}, lifecycle: 'active', created_at: 1795672552.7,
  ...extra,
})
const NEW_MODEL = model('mdl_2', 'sums-sl+feedback', { job_id: 'job_9', dataset_id: 'ds_pairs3', step: 30 })
const LINEAGE = {
  base_model: 'thinker/tiny', stage: null, step: 30, metrics: {},
  parent_model: { id: 'mdl_1', name: 'sums-sl' },
  dataset: { id: 'ds_pairs3', name: 'feedback-preferences' },
  job: { id: 'job_9', name: 'sums-sl+feedback', algorithm: 'dpo', state: 'succeeded' },
}
const dataset = (id: string, name: string, kind: string, version: number, rows: number, root: string | null) => ({
  id, name, kind, version, num_rows: rows, root_id: root, builtin: false,
})
const job = (state: string, step: number, reason: string | null = null) => ({
  id: 'job_9', name: 'sums-sl+feedback', algorithm: 'dpo', state, step, total_steps: 30, progress: step / 30, reason,
  parent_model_id: 'mdl_1', dataset_id: 'ds_pairs3', priority: 10,
})

/** Each model's answer: the learned one gets the sum right. */
const ANSWERS: Record<string, string> = { mdl_1: 'about 14', mdl_2: '15', 'thinker/tiny': 'seven and eight' }

let sent: Sent[]
let learned: boolean
/** The job's states, one per poll (the last repeats). */
let polls: ReturnType<typeof job>[]

function setUp() {
  sent = servePlayground(fetchMock, {
    'GET /v1/models': () => ({
      body: {
        object: 'list',
        data: [
          { id: 'thinker/tiny', parent: null },
          { id: 'mdl_1', parent: 'thinker/tiny' },
          ...(learned ? [{ id: 'mdl_2', parent: 'mdl_1' }] : []),
        ],
      },
    }),
    'GET /api/models': (s) => {
      if (new URLSearchParams(s.search).get('job_id') === 'job_9') return { body: { data: [NEW_MODEL], count: 1 } }
      const data = [...(learned ? [NEW_MODEL] : []), model('mdl_1', 'sums-sl')]
      return { body: { data, count: data.length } }
    },
    'GET /api/models/mdl_2': () => ({ body: { ...NEW_MODEL, lineage: LINEAGE, export: null } }),
    'GET /api/datasets': (s) => {
      const kind = new URLSearchParams(s.search).get('kind')
      const data = kind === 'preferences'
        ? [dataset('ds_pairs1', 'feedback-preferences', 'preferences', 1, 17, null), dataset('ds_pairs3', 'feedback-preferences', 'preferences', 3, 18, 'ds_pairs1')]
        : [dataset('ds_good1', 'feedback-demonstrations', 'chat', 1, 2, null)]
      return { body: { data, count: data.length } }
    },
    'POST /api/models/mdl_1/learn': () => ({ status: 201, body: job('queued', 0) }),
    'GET /api/jobs/job_9': () => {
      const state = polls.length > 1 ? polls.shift()! : polls[0]
      if (state.state === 'succeeded') learned = true
      return { body: state }
    },
    'POST /api/evaluations/compare': (s) => {
      const { a, b, outcomes } = s.body as { a: string; b: string; outcomes: number[] }
      const wins = outcomes.filter((o) => o === 1).length
      const losses = outcomes.filter((o) => o === -1).length
      return {
        body: {
          a, b, n: outcomes.length, wins, losses, ties: outcomes.length - wins - losses, win_rate: 1, interval: [0.2, 1],
          p_value: 1, significant: false, needed: 23,
          verdict: `No significant difference between ${a} and ${b}: n = ${outcomes.length}`,
        },
      }
    },
  }, (id) => ANSWERS[id] ?? '?')
}

beforeEach(() => {
  learned = false
  polls = [job('running', 12), job('succeeded', 30)]
  // Feedback was last saved to the preference pairs (version 3 is that lineage's newest).
  useFeedbackTarget.setState({ roots: { preferences: 'ds_pairs1' }, last: { kind: 'preferences', root: 'ds_pairs1' } })
  useBlind.setState({ blind: false, tallies: {} })
  setUp()
})
afterEach(() => vi.restoreAllMocks())

const streamed = () => sent.filter((s) => s.path === '/api/sample/stream').map((s) => s.body as { model: string; messages: unknown[] })

async function chat(user: ReturnType<typeof userEvent.setup>, text: string) {
  await user.type(await screen.findByLabelText('Message'), text)
  await user.click(screen.getByRole('button', { name: 'Send' }))
  await screen.findByLabelText('Thumbs up')
}

async function learnFromFeedback(user: ReturnType<typeof userEvent.setup>) {
  await user.click(screen.getByRole('button', { name: /Learn from this/ }))
  const dialog = await screen.findByRole('dialog', { name: 'Learn from feedback' })
  // The default: the dataset feedback was last saved to, its newest version.
  await waitFor(() => expect(within(dialog).getByLabelText('Feedback dataset')).toHaveValue('ds_pairs3'))
  expect(within(dialog).getByTestId('learn-wording')).toHaveTextContent('DPO on your A/B choices')
  expect(within(dialog).getByLabelText('Steps')).toHaveValue('30')
  await user.click(within(dialog).getByRole('button', { name: 'Start learning' }))
  expect(screen.queryByRole('dialog')).not.toBeInTheDocument()
}

describe('Learn from this', () => {
  test('chat → learn → progress → model n+1 answers the last prompt again, before and after side by side', async () => {
    const user = userEvent.setup()
    renderAt(<PlaygroundView />, '/playground?model=mdl_1', '/playground')
    await chat(user, '7+8')
    expect(screen.getByText('about 14')).toBeInTheDocument()

    await learnFromFeedback(user)
    const learn = sent.find((s) => s.path === '/api/models/mdl_1/learn')
    expect(learn?.body).toEqual({ dataset_id: 'ds_pairs3', max_steps: 30 })

    // The job's progress, with its page a click away.
    expect(await screen.findByText('step 12 / 30')).toBeInTheDocument()
    expect(screen.getByRole('link', { name: /Open the job page/ })).toHaveAttribute('href', '/training/job_9')

    // Succeeded: model n+1 is picked and answers the conversation's last prompt.
    const pair = await screen.findByRole('region', { name: 'Before and after learning' })
    expect(within(pair).getByTestId('lineage-line')).toHaveTextContent(
      'sums-sl → sums-sl+feedback · feedback-preferences v3 · 18 rows · DPO on your A/B choices · 30 steps',
    )
    expect(within(pair).getByTestId('before-answer')).toHaveTextContent('about 14')
    await waitFor(() => expect(within(pair).getByTestId('after-answer')).toHaveTextContent('15'))
    expect(streamed().at(-1)).toEqual({ model: 'mdl_2', messages: [{ role: 'user', content: '7+8' }], temperature: 0.7, top_p: 1, max_tokens: 256 })
    await waitFor(() => expect(screen.getByTestId('model')).toHaveValue('mdl_2'))
    expect(sent.some((s) => s.path === '/api/models' && s.search.includes('job_id=job_9'))).toBe(true)

    // The next message goes to the new model; the old one is a click away.
    await user.click(within(pair).getByRole('button', { name: '← Back to sums-sl' }))
    expect(screen.getByTestId('model')).toHaveValue('mdl_1')
    await user.click(within(pair).getByRole('button', { name: 'Use sums-sl+feedback again' }))
    expect(screen.getByTestId('model')).toHaveValue('mdl_2')
  })

  test('a failed job shows its reason and keeps the model', async () => {
    polls = [job('running', 4), job('failed', 4, 'CUDA out of memory')]
    const user = userEvent.setup()
    renderAt(<PlaygroundView />, '/playground?model=mdl_1', '/playground')
    await chat(user, '7+8')
    await learnFromFeedback(user)

    const alert = await screen.findByRole('alert')
    expect(alert).toHaveTextContent('Learning failed')
    expect(alert).toHaveTextContent('CUDA out of memory')
    expect(within(alert).getByRole('link', { name: /Open the job page/ })).toHaveAttribute('href', '/training/job_9')
    expect(screen.queryByRole('region', { name: 'Before and after learning' })).not.toBeInTheDocument()
    expect(screen.getByTestId('model')).toHaveValue('mdl_1')
    expect(sent.some((s) => s.search.includes('job_id'))).toBe(false)
    // Another try is allowed.
    expect(screen.getByRole('button', { name: /Learn from this/ })).toBeEnabled()
  })

  test('built-in base models cannot learn', async () => {
    renderAt(<PlaygroundView />, '/playground?model=thinker/tiny', '/playground')
    expect(await screen.findByText(/Built-in base models cannot learn/)).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: /Learn from this/ })).not.toBeInTheDocument()
  })
})

describe('blind A/B', () => {
  test('answers unnamed in a random order; the choice counts for B, names revealed, the tally and verdict shown', async () => {
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.7) // B's answer first
    const user = userEvent.setup()
    renderAt(<PlaygroundView />, '/playground?a=mdl_1&b=thinker/tiny', '/playground')
    await user.click(await screen.findByLabelText('Blind'))
    await user.type(screen.getByLabelText('Prompt for both models'), '7+8')
    await user.click(screen.getByRole('button', { name: 'Compare' }))

    const first = await screen.findByTestId('blind-1')
    await waitFor(() => expect(first).toHaveTextContent('seven and eight'))
    expect(first).toHaveTextContent('Answer 1')
    expect(first).not.toHaveTextContent('thinker/tiny')
    expect(screen.getByTestId('blind-2')).toHaveTextContent('about 14')
    expect(screen.queryByRole('button', { name: /A is better/ })).not.toBeInTheDocument()

    // Answer 1 is B's: picking it is a win for B, and a preference pair offered to save.
    await user.click(screen.getByRole('button', { name: /Answer 1 is better/ }))
    const saver = await screen.findByRole('dialog', { name: 'Save feedback' })
    expect(saver).toHaveTextContent('"chosen": [')
    expect(JSON.parse(within(saver).getByText(/"rejected"/).textContent ?? '{}')).toEqual({
      messages: [{ role: 'user', content: '7+8' }],
      chosen: [{ role: 'assistant', content: 'seven and eight' }],
      rejected: [{ role: 'assistant', content: 'about 14' }],
    })
    await user.click(within(saver).getByRole('button', { name: 'Cancel' }))

    expect(screen.getByTestId('reveal')).toHaveTextContent('Answer 1 was thinker/tiny (B) · Answer 2 was sums-sl · thinker/tiny + step 20 (A)')
    const tally = screen.getByRole('region', { name: 'Blind tally' })
    await waitFor(() => expect(within(tally).getByTestId('verdict')).toHaveTextContent('No significant difference between sums-sl and thinker/tiny: n = 1'))
    expect(within(tally).getByTestId('needed')).toHaveTextContent('about 22 more decided prompts for a reliable answer')
    expect(within(tally).getByTestId('tally-counts')).toHaveTextContent(/^1wins.*0ties.*0losses/)
    const compares = () => sent.filter((s) => s.path === '/api/evaluations/compare').map((s) => s.body)
    expect(compares()).toEqual([{ a: 'sums-sl', b: 'thinker/tiny', outcomes: [1] }])

    // The next prompt: A's answer first; a tie offers nothing to save and counts as 0.
    random.mockReturnValue(0.2)
    await user.click(screen.getByRole('button', { name: 'Compare' }))
    await waitFor(() => expect(screen.getByTestId('blind-1')).toHaveTextContent('about 14'))
    expect(screen.queryByTestId('reveal')).not.toBeInTheDocument()
    await user.click(screen.getByRole('button', { name: 'Tie' }))
    expect(screen.queryByRole('dialog')).not.toBeInTheDocument()
    await waitFor(() => expect(within(tally).getByTestId('verdict')).toHaveTextContent('n = 2'))
    expect(compares().at(-1)).toEqual({ a: 'sums-sl', b: 'thinker/tiny', outcomes: [1, 0] })
    expect(within(tally).getByTestId('tally-counts')).toHaveTextContent(/^1wins.*1ties.*0losses/)

    // A third, A's answer chosen: a loss for B.
    await user.click(screen.getByRole('button', { name: 'Compare' }))
    await waitFor(() => expect(screen.getByTestId('blind-1')).toHaveTextContent('about 14'))
    await user.click(screen.getByRole('button', { name: /Answer 1 is better/ }))
    await user.click(within(await screen.findByRole('dialog', { name: 'Save feedback' })).getByRole('button', { name: 'Cancel' }))
    await waitFor(() => expect(compares().at(-1)).toEqual({ a: 'sums-sl', b: 'thinker/tiny', outcomes: [1, 0, -1] }))
  })
})
