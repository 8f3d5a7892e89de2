import { cleanup, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../../components/Training/testing'
import { configSchema } from '../../api/jobConfig'
import { WizardPage } from './WizardPage'

const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

// The launch step follows the job live; the socket is network too.
vi.mock('socket.io-client', () => ({
  io: () => ({ connected: false, on() {}, off() {}, emit() {}, disconnect() {} }),
}))

afterEach(() => {
  cleanup()
  fetchMock.mockReset()
})

const DATASETS = {
  data: [
    { id: 'ds_1', name: 'arith', version: 1, kind: 'chat', num_rows: 100 },
    { id: 'ds_p', name: 'prefs', version: 1, kind: 'preferences', num_rows: 40 },
  ],
  count: 2,
}

type Request_ = { algorithm: string; base_model: string; dataset_id: string; config: Record<string, number> }

/** A stand-in for the server's proposal (pipeline/proposal.py for thinker/tiny): 800 steps of
 * 32; given values kept; given epochs (without steps) recompute the steps. */
function propose(req: Request_) {
  const given = req.config
  const batch = given.batch_size ?? 32
  const byEpochs = given.num_epochs !== undefined && given.max_steps === undefined
  const steps = byEpochs ? given.num_epochs * Math.floor(90 / batch) : (given.max_steps ?? 800)
  const config: Record<string, number> = { batch_size: batch, learning_rate: 3e-3, eval_every: Math.round(steps / 10), save_every: Math.round(steps / 5), ...given }
  if (!byEpochs) config.max_steps = steps
  return {
    algorithm: req.algorithm, base_model: req.base_model, parent_model_id: null, config, total_steps: steps, train_rows: 90,
    stages: [{ stage: req.algorithm, rows: 100, train_rows: 90, steps, config, why: ['100 examples, 90 to train on after the held-out share'] }],
    warnings: req.base_model === 'thinker/tiny' ? ['thinker/tiny starts from random weights: expect it to learn the format, not the task.'] : [],
  }
}

let proposals: Request_[]
let created: unknown[]

function serve(overrides: Parameters<typeof answer>[1] = {}) {
  proposals = []
  created = []
  answer(fetchMock, {
    'GET /api/datasets': () => ({ body: DATASETS }),
    'GET /api/base-models': () => ({
      body: { data: [
        { id: 'thinker/tiny', kind: 'builtin', label: 'thinker/tiny', detail: 'random weights, CPU' },
        { id: 'mdl_7', kind: 'library', label: 'arith-sl@20', detail: 'step 20 of job arith-sl, exact match 0.68' },
      ] },
    }),
    'POST /api/jobs/proposal': (_q, body) => {
      proposals.push(body as Request_)
      return { body: propose(body as Request_) }
    },
    'GET /api/jobs': () => ({ body: { data: [], count: 0 } }),
    'POST /api/jobs': (_q, body) => {
      created.push(body)
      return { status: 201, body: job({ state: 'queued', step: 0 }) }
    },
    'GET /api/jobs/job_1': () => ({ body: job({ state: 'queued', step: 0 }) }),
    'GET /api/jobs/job_1/metrics': () => ({ body: { data: [], count: 0, next_offset: null } }),
    'GET /api/models': () => ({ body: { data: [], count: 0 } }),
    ...overrides,
  })
}

beforeEach(() => serve())

async function toConfiguration(user: ReturnType<typeof userEvent.setup>, path = '/training/wizard') {
  renderAt(<WizardPage />, path, '/training/wizard')
  await user.click(await screen.findByRole('button', { name: /Teach a format or the right answers/ }))
  await user.click(screen.getByRole('button', { name: /^Next/ }))
  await user.selectOptions(screen.getByLabelText(/^Dataset/), 'ds_1')
  await user.click(screen.getByRole('button', { name: /^Next/ }))
  await screen.findByTestId('stage-sl')
}

const field = (label: RegExp) => screen.getByLabelText(label, { selector: 'input' })

async function retype(user: ReturnType<typeof userEvent.setup>, label: RegExp, text: string) {
  await user.clear(field(label))
  if (text) await user.type(field(label), text)
}

describe('the wizard configuration: the server proposes, the user edits, the request is what is shown', () => {
  test('the proposal: its steps, why lines and warnings', async () => {
    const user = userEvent.setup()
    await toConfiguration(user)
    expect(proposals[0]).toEqual({ algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', config: {} })
    expect(screen.getByTestId('steps-sl')).toHaveTextContent('800 steps')
    expect(screen.getByText(/90 to train on after the held-out share/)).toBeInTheDocument()
    expect(screen.getByRole('alert', { name: 'warnings' })).toHaveTextContent(/starts from random weights/)
    expect(field(/^Batch size/)).toHaveValue('32')
    expect(field(/^Steps/)).toHaveValue('800')
    // Not in the proposal, so not sent: shown empty, not with a made-up value.
    expect(field(/^Epochs/)).toHaveValue('')
    expect(field(/^Learning rate/)).toHaveValue('0.003')
    expect(screen.getByRole('button', { name: /^Next/ })).toBeEnabled()
    // The help is the server's description of the setting.
    const help = document.getElementById(screen.getByRole('button', { name: 'About Batch size' }).getAttribute('aria-describedby') ?? '')
    expect(help).toHaveTextContent(String(configSchema('sl').properties.batch_size.description))
  })

  test('every refused value shows its message under the field and holds Next back', async () => {
    const user = userEvent.setup()
    await toConfiguration(user)
    const next = screen.getByRole('button', { name: /^Next/ })

    const cases: [RegExp, string, string][] = [
      [/^Learning rate/, 'abc', '"abc" is not a number.'],
      [/^Learning rate/, '-0.01', 'Must be greater than 0.'],
      [/^Epochs/, '0', 'Must be greater than 0.'],
      [/^Batch size/, '100000', 'Larger than the 90 training rows: at most 90.'],
      [/^Save every/, '', 'Enter a value.'],
      [/^Steps/, '1.5', 'Must be a whole number.'],
    ]
    for (const [label, text, message] of cases) {
      await retype(user, label, text)
      expect(field(label)).toHaveAttribute('aria-invalid', 'true')
      const error = document.getElementById(field(label).getAttribute('aria-describedby') ?? '')
      expect(error).toHaveTextContent(message)
      expect(next).toBeDisabled()
      const fixed: Record<string, string> = { Learning: '0.001', Epochs: '2', Batch: '8', Save: '5', Steps: '' }
      await retype(user, label, Object.entries(fixed).find(([k]) => label.source.includes(k))?.[1] ?? '')
      expect(field(label)).not.toHaveAttribute('aria-invalid')
    }
    // eval_every 0 is allowed by the server's rules ("only at the end"): sent as 0, not replaced.
    await retype(user, /^Evaluate every/, '0')
    expect(field(/^Evaluate every/)).not.toHaveAttribute('aria-invalid')

    // The server recomputes the steps from the edits: 2 epochs × floor(90 / 8).
    await waitFor(() => expect(screen.getByTestId('steps-sl')).toHaveTextContent('22 steps'))
    // The "22 steps" can come from the proposal before the last edit: wait for that edit's own.
    await waitFor(() =>
      expect(proposals.at(-1)?.config).toEqual({ learning_rate: 0.001, num_epochs: 2, batch_size: 8, save_every: 5, eval_every: 0 }),
    )
    // Refused values never reached the server.
    expect(proposals.some((p) => p.config.batch_size === 100000 || p.config.num_epochs === 0)).toBe(false)
    await waitFor(() => expect(next).toBeEnabled())
  })

  test('the review shows the request exactly as it is sent, with a distinct default name', async () => {
    const user = userEvent.setup()
    await toConfiguration(user)
    await retype(user, /^Epochs/, '40')
    await waitFor(() => expect(screen.getByTestId('steps-sl')).toHaveTextContent('80 steps'))
    expect(field(/^Steps/)).toHaveValue('')
    expect(field(/^Steps/)).toHaveAttribute('placeholder', '80, from the epochs')
    await user.click(screen.getByRole('button', { name: /^Next/ }))

    expect(screen.getByTestId('estimate-steps')).toHaveTextContent('80 steps')
    const shown = JSON.parse(screen.getByTestId('review-request').textContent ?? '')
    expect(shown.config).toEqual({ num_epochs: 40, batch_size: 32, learning_rate: 0.003, eval_every: 8, save_every: 16 })
    expect(shown.name).toMatch(/^arith-sl-\d{4}-\d{4}$/)

    await user.click(screen.getByRole('button', { name: 'Launch training' }))
    await user.click(screen.getByRole('button', { name: 'Yes, start training' }))
    await screen.findByLabelText('Deploy steps')
    expect(created).toEqual([shown])
  })

  test('a base model the server cannot have: its 422 shows on the field', async () => {
    serve({
      'POST /api/jobs/proposal': (_q, body) => {
        const req = body as Request_
        if (req.base_model === 'nosuch/model') {
          return { status: 422, body: { detail: 'invalid job', problems: ['base_model: nosuch/model is not on the Hub and not cached (offline)'] } }
        }
        return { body: propose(req) }
      },
    })
    const user = userEvent.setup()
    await toConfiguration(user)
    const model = screen.getByLabelText('Base model')
    await user.clear(model)
    await user.type(model, 'nosuch/model')
    await waitFor(() => expect(model).toHaveAttribute('aria-invalid', 'true'))
    expect(document.getElementById(model.getAttribute('aria-describedby') ?? '')).toHaveTextContent('not on the Hub and not cached')
    expect(screen.getByRole('button', { name: /^Next/ })).toBeDisabled()
  })
})

describe('a job the server refuses at creation', () => {
  test('a 422 on base_model: listed in the review, shown on the field back in the configuration', async () => {
    serve({
      'POST /api/jobs': () => ({ status: 422, body: { detail: 'invalid job', problems: ['base_model: thinker/tiny is offline and not cached'] } }),
    })
    const user = userEvent.setup()
    await toConfiguration(user)
    await user.click(screen.getByRole('button', { name: /^Next/ }))
    await user.click(screen.getByRole('button', { name: 'Launch training' }))
    await user.click(screen.getByRole('button', { name: 'Yes, start training' }))
    expect(await screen.findByText('The server refused the job')).toBeInTheDocument()
    await user.click(screen.getByRole('button', { name: /Back to the configuration/ }))
    const model = screen.getByLabelText('Base model')
    expect(model).toHaveAttribute('aria-invalid', 'true')
    expect(document.getElementById(model.getAttribute('aria-describedby') ?? '')).toHaveTextContent('offline and not cached')
    expect(screen.getByRole('button', { name: /^Next/ })).toBeDisabled()
    await user.clear(model)
    await user.type(model, 'Qwen/Qwen3-0.6B')
    expect(model).not.toHaveAttribute('aria-invalid')
    await waitFor(() => expect(screen.getByRole('button', { name: /^Next/ })).toBeEnabled())
  })
})

describe('continuing from a library model', () => {
  test('?from= puts the model in the base-model field and offers SL, DPO and RL', async () => {
    const user = userEvent.setup()
    renderAt(<WizardPage />, '/training/wizard?from=mdl_7', '/training/wizard')
    expect(await screen.findByText(/Continuing from/)).toHaveTextContent('arith-sl@20')
    const goals = screen.getAllByRole('button', { pressed: false }).map((b) => within(b).queryByText(/^(SL|DPO|RL|RLHF)$/)?.textContent)
    expect(goals.filter(Boolean)).toEqual(['SL', 'DPO', 'RL'])
    await user.click(screen.getByRole('button', { name: /Teach a format or the right answers/ }))
    await user.click(screen.getByRole('button', { name: /^Next/ }))
    await user.selectOptions(screen.getByLabelText(/^Dataset/), 'ds_1')
    await user.click(screen.getByRole('button', { name: /^Next/ }))
    expect(await screen.findByLabelText('Base model')).toHaveValue('mdl_7')
    expect(screen.getByText(/Continues from arith-sl@20/)).toBeInTheDocument()
    await waitFor(() => expect(proposals.at(-1)?.base_model).toBe('mdl_7'))
  })
})
