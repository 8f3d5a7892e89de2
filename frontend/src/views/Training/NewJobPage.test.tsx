import { act, cleanup, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { answer, job, renderAt } from '../../components/Training/testing'
import { NewJobPage } from './NewJobPage'

const fetchMock = vi.hoisted(() => {
  ;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL('http://localhost')
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => {
  cleanup()
  fetchMock.mockReset()
})

let created: unknown[]
beforeEach(() => {
  created = []
  answer(fetchMock, {
    'GET /api/datasets': () => ({
      body: {
        data: [{ id: 'ds_1', name: 'arith', version: 1, kind: 'chat', num_rows: 100 }, { id: 'ds_p', name: 'pairs', version: 2, kind: 'preferences', num_rows: 40 }],
        count: 2,
      },
    }),
    'GET /api/base-models': () => ({ body: { data: [{ id: 'thinker/tiny', kind: 'builtin', label: 'thinker/tiny', detail: '' }] } }),
    'POST /api/jobs/proposal': (_q, body) => {
      const config = { batch_size: 16, num_epochs: 3, learning_rate: 0.003, eval_every: 2, save_every: 3, ...(body as { config: object }).config }
      return { body: { algorithm: 'sl', base_model: 'thinker/tiny', config, total_steps: 15, train_rows: 90, warnings: [], stages: [{ stage: 'sl', rows: 100, train_rows: 90, steps: 15, config, why: [] }] } }
    },
    'POST /api/jobs': (_q, body) => {
      created.push(body)
      const model = (body as { base_model: string }).base_model
      return model === 'Qwen/Gated'
        ? { status: 422, body: { detail: 'invalid job', problems: ['base_model: Qwen/Gated is gated: set HF_TOKEN'] } }
        : { status: 201, body: job({ id: 'job_9', state: 'queued' }) }
    },
    'GET /api/models': () => ({
      body: {
        data: [
          { id: 'mdl_a', name: 'arith-sl@100', base_model: 'thinker/tiny', backend: 'local', step: 100, job_id: 'job_0' },
          { id: 'mdl_b', name: 'arith-sl@50', base_model: 'thinker/tiny', backend: 'local', step: 50, job_id: 'job_0' },
          { id: 'mdl_t', name: 'qwen-sl@10', base_model: 'Qwen/Qwen3-8B', backend: 'tinker', step: 10, job_id: 'job_t' },
        ],
        count: 3,
      },
    }),
    'GET /api/jobs/job_old': () => ({
      body: job({ id: 'job_old', name: 'arith-old', state: 'failed', gpus: 2, retryable: false, parent_model_id: 'mdl_3', base_model: 'thinker/tiny', config: { batch_size: 8, learning_rate: 0.5, seed: 3, dataset: '/srv/data/x.jsonl' } }),
    }),
  })
})

const input = (label: RegExp) => screen.getByLabelText(label, { selector: 'input' })

describe('the advanced form refuses what it cannot use', () => {
  test('empty fields show the proposal; bad numbers show under their field and block Queue', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText(/^Dataset/), 'ds_1')
    await waitFor(() => expect(input(/^Batch size/)).toHaveAttribute('placeholder', 'proposed: 16'))
    expect(input(/^Batch size/)).toHaveValue('')
    const queue = screen.getByRole('button', { name: 'Queue the job' })
    expect(queue).toBeEnabled()

    for (const [label, text, message] of [
      [/^Learning rate/, 'abc', '"abc" is not a number.'],
      [/^Epochs/, '0', 'Must be greater than 0.'],
      [/^Batch size/, '100000', 'Larger than the 90 training rows: at most 90.'],
      [/^Eval every/, '-1', 'Must be at least 0.'],
    ] as const) {
      await user.type(input(label), text)
      expect(input(label)).toHaveAttribute('aria-invalid', 'true')
      expect(document.getElementById(input(label).getAttribute('aria-describedby') ?? '')).toHaveTextContent(message)
      expect(queue).toBeDisabled()
      await user.clear(input(label))
    }
    await user.type(input(/^Eval every/), '0') // allowed: evaluate only at the end
    await user.type(input(/^Batch size/), '8')
    expect(queue).toBeEnabled()
    await user.click(queue)
    await waitFor(() => expect(created).toHaveLength(1))
    expect((created[0] as { config: object }).config).toEqual({ eval_every: 0, batch_size: 8 })
  })

  test('auto-resume retries: 2 unless changed, checked as typed, sent as auto_resume', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText(/^Dataset/), 'ds_1')
    const field = input(/^Auto-resume retries/)
    expect(field).toHaveValue('2')
    expect(screen.getByText('Times the job resumes from its last checkpoint by itself when its worker or node is lost.')).toBeInTheDocument()
    expect(screen.getByTestId('request-preview')).toHaveTextContent('"auto_resume": 2')
    const queue = screen.getByRole('button', { name: 'Queue the job' })
    await user.clear(field)
    await user.type(field, '11')
    expect(field).toHaveAttribute('aria-invalid', 'true')
    expect(document.getElementById(field.getAttribute('aria-describedby') ?? '')).toHaveTextContent('Must be at most 10.')
    expect(queue).toBeDisabled()
    await user.clear(field)
    await user.type(field, '0')
    expect(queue).toBeEnabled()
    await user.click(queue)
    await waitFor(() => expect(created).toHaveLength(1))
    expect(created[0]).toMatchObject({ auto_resume: 0 })
  })

  test('GPUs: 1 unless changed, sent as gpus; several only for local sl, dpo, rl and batch jobs', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText(/^Dataset/), 'ds_1')
    const field = input(/^GPUs \(data-parallel processes\)/)
    expect(field).toHaveValue('1')
    expect(screen.getByText("Processes that train the job data-parallel, one GPU each (sl, dpo and rl; the batch is shared out, the results are one process's).")).toBeInTheDocument()
    expect(screen.getByTestId('request-preview')).toHaveTextContent('"gpus": 1')
    const queue = screen.getByRole('button', { name: 'Queue the job' })
    const errorOf = () => document.getElementById(field.getAttribute('aria-describedby') ?? '')

    await user.clear(field)
    await user.type(field, '9')
    expect(field).toHaveAttribute('aria-invalid', 'true')
    expect(errorOf()).toHaveTextContent('Must be at most 8.')
    expect(queue).toBeDisabled()

    // an RLHF job trains as one process
    await user.clear(field)
    await user.type(field, '2')
    expect(queue).toBeEnabled()
    await user.selectOptions(screen.getByLabelText('Algorithm'), 'rlhf')
    expect(field).toHaveValue('2')
    expect(field).toHaveAttribute('aria-invalid', 'true')
    expect(errorOf()).toHaveTextContent('Only local sl, dpo, rl and batch jobs use several GPUs.')
    expect(queue).toBeDisabled()
    await user.selectOptions(screen.getByLabelText('Algorithm'), 'sl')
    await user.selectOptions(screen.getByLabelText(/^Dataset/), 'ds_1')
    expect(field).not.toHaveAttribute('aria-invalid', 'true')
    expect(queue).toBeEnabled()
    await user.click(queue)
    await waitFor(() => expect(created).toHaveLength(1))
    expect(created[0]).toMatchObject({ algorithm: 'sl', gpus: 2 })
  })

  test('the base model is free text; a 422 about it shows on the field', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText(/^Dataset/), 'ds_1')
    const model = screen.getByLabelText('Base model')
    expect(model).toHaveAttribute('list', 'nj-model-options')
    expect(screen.getByText(/a model from your/)).toBeInTheDocument()
    await user.clear(model)
    await user.type(model, 'Qwen/Gated')
    await user.click(screen.getByRole('button', { name: 'Queue the job' }))
    await waitFor(() => expect(model).toHaveAttribute('aria-invalid', 'true'))
    expect(document.getElementById(model.getAttribute('aria-describedby') ?? '')).toHaveTextContent('Qwen/Gated is gated: set HF_TOKEN')
  })

  test('?from_job= starts from an ended job: its data, its start model and its settings', async () => {
    renderAt(<NewJobPage />, '/training/new?from_job=job_old', '/training/new')
    expect(await screen.findByRole('link', { name: 'arith-old' })).toHaveAttribute('href', '/training/job_old')
    expect(screen.getByLabelText('Base model')).toHaveValue('mdl_3')
    expect(screen.getByLabelText(/^Dataset/)).toHaveValue('ds_1')
    expect(input(/^Batch size/)).toHaveValue('8')
    expect(input(/^Learning rate/)).toHaveValue('0.5')
    expect(input(/^GPUs/)).toHaveValue('2')
    expect(JSON.parse((screen.getByLabelText(/^Other settings/) as HTMLTextAreaElement).value)).toEqual({ seed: 3 })
  })
})

describe('a batch job', () => {
  test('the form offers batch, sends its settings as typed, and never asks for a proposal', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText('Algorithm'), 'batch')
    expect(screen.getByRole('heading', { level: 1 })).toHaveTextContent('New batch job')
    await user.selectOptions(screen.getByLabelText(/^Dataset/), 'ds_1')
    // empty fields take their defaults, shown as placeholders
    expect(input(/^Samples per input/)).toHaveAttribute('placeholder', 'default: 4')
    expect(input(/^Confidence threshold/)).toHaveAttribute('placeholder', 'default: 0.5')
    await user.selectOptions(screen.getByLabelText(/^Task/, { selector: 'select' }), 'fix')
    await user.type(input(/^Samples per input/), '8')
    await user.type(input(/^Workers/), '3')
    await user.type(screen.getByLabelText(/^System prompt/, { selector: 'textarea' }), 'Fix the bug; change nothing else.')
    expect(screen.getByLabelText('batch plan')).toHaveTextContent("Each of the dataset's 100 rows is answered 8 times by a pool of 3 actors, 4 rows at a time (task fix).")
    expect(screen.queryByLabelText('proposal')).toBeNull()
    // past the form's debounce (350 ms), the proposal would have been asked: it is not
    await act(() => new Promise((resolve) => setTimeout(resolve, 500)))
    expect(fetchMock.mock.calls.some(([r]) => r instanceof Request && r.url.endsWith('/api/jobs/proposal'))).toBe(false)

    await user.click(screen.getByRole('button', { name: 'Queue the job' }))
    await waitFor(() => expect(created).toHaveLength(1))
    expect(created[0]).toEqual({
      algorithm: 'batch', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', priority: 0, gpus: 1, auto_resume: 2,
      config: { task: 'fix', samples: 8, workers: 3, system_prompt: 'Fix the bug; change nothing else.' },
    })
  })
})

describe('a reward model job', () => {
  test('the form offers RM, not Review; its empty settings show the proposal, as a training job\'s do', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new?algorithm=rm&base_model=mdl_rm', '/training/new')
    const algorithm = await screen.findByLabelText('Algorithm')
    expect(algorithm).toHaveValue('rm')
    const offered = Array.from((algorithm as HTMLSelectElement).options).map((o) => o.value)
    expect(offered).toContain('rm')
    expect(offered).not.toContain('review')
    expect(screen.getByRole('heading', { level: 1 })).toHaveTextContent('New training job')
    expect(screen.getByLabelText('Base model')).toHaveValue('mdl_rm')
    // preference pairs only
    const dataset = screen.getByLabelText(/^Dataset/)
    expect(Array.from((dataset as HTMLSelectElement).options).map((o) => o.value)).toEqual(['', 'ds_p'])
    await user.selectOptions(dataset, 'ds_p')
    expect(screen.getByLabelText(/^Reward model head/, { selector: 'select' })).toHaveDisplayValue('default: "judge"')
    await user.type(input(/^Max steps/), '30')
    await waitFor(() => expect(input(/^Learning rate/)).toHaveAttribute('placeholder', 'proposed: 0.003'))
    const asked = fetchMock.mock.calls.filter(([r]) => r instanceof Request && r.url.endsWith('/api/jobs/proposal'))
    expect(asked.length).toBeGreaterThan(0)

    await user.click(screen.getByRole('button', { name: 'Queue the job' }))
    await waitFor(() => expect(created).toHaveLength(1))
    expect(created[0]).toMatchObject({ algorithm: 'rm', base_model: 'mdl_rm', dataset_id: 'ds_p', config: { max_steps: 30 } })
  })
})

describe('an eval job', () => {
  test('the form offers Evaluate (A/B): the eval set, the baseline, library models to compare, the scorer; it posts them', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new', '/training/new')
    await user.selectOptions(await screen.findByLabelText('Algorithm'), 'eval')
    expect(screen.getByRole('heading', { level: 1 })).toHaveTextContent('New evaluation')
    expect(screen.getByTestId('eval-explainer')).toHaveTextContent('significance by a sign test, with a bootstrap interval')
    await user.selectOptions(screen.getByLabelText(/^Eval set/), 'ds_1')
    expect(screen.getByLabelText('Baseline (A)')).toHaveValue('thinker/tiny')
    // nothing to compare yet: the job cannot be queued
    const queue = screen.getByRole('button', { name: 'Queue the job' })
    expect(queue).toBeDisabled()
    expect(screen.getAllByText(/choose at least one model to compare with the baseline/).length).toBeGreaterThan(0)

    // the library's models of this backend, ticked in the order they are evaluated
    expect(await screen.findByLabelText('evaluate arith-sl@100')).toBeInTheDocument()
    expect(screen.queryByLabelText('evaluate qwen-sl@10')).toBeNull()
    await user.click(screen.getByLabelText('evaluate arith-sl@50'))
    await user.click(screen.getByLabelText('evaluate arith-sl@100'))
    expect(screen.getByRole('list', { name: 'models to compare' })).toHaveTextContent('B1arith-sl@50✕B2arith-sl@100✕')
    // a base model by name too
    await user.type(screen.getByLabelText('Or a base model'), 'Qwen/Qwen3-0.6B{Enter}')
    await user.click(screen.getByRole('button', { name: 'remove Qwen/Qwen3-0.6B' }))

    await user.selectOptions(screen.getByLabelText('Scorer'), 'regex')
    expect(screen.getByTestId('scorer-help')).toHaveTextContent('matches a pattern')
    expect(queue).toBeDisabled() // a regex needs its pattern
    await user.type(screen.getByLabelText('Pattern'), '^7$')
    await user.type(input(/^Max tokens/), '16')
    await user.type(input(/^Samples per prompt/), '3')
    expect(input(/^Temperature/)).toHaveAttribute('placeholder', 'default: 0')
    await user.type(input(/^Temperature/), '0.7')
    expect(screen.getByLabelText('evaluation plan')).toHaveTextContent("thinker/tiny and arith-sl@50, arith-sl@100 answer each of its 100 prompts; each answer is scored by regex.")
    expect(screen.queryByLabelText('processes')).toBeNull() // one process
    await act(() => new Promise((resolve) => setTimeout(resolve, 500)))
    expect(fetchMock.mock.calls.some(([r]) => r instanceof Request && r.url.endsWith('/api/jobs/proposal'))).toBe(false)

    expect(queue).toBeEnabled()
    await user.click(queue)
    await waitFor(() => expect(created).toHaveLength(1))
    expect(created[0]).toEqual({
      algorithm: 'eval', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', priority: 0, gpus: 1, auto_resume: 2,
      config: { max_tokens: 16, samples: 3, temperature: 0.7, models: ['mdl_b', 'mdl_a'], scorer: { type: 'regex', pattern: '^7$' } },
    })
  })

  test('a model\'s Evaluate link opens it against its base model; the baseline cannot be compared with itself', async () => {
    const user = userEvent.setup()
    renderAt(<NewJobPage />, '/training/new?algorithm=eval&base_model=thinker/tiny&models=mdl_a', '/training/new')
    expect(await screen.findByLabelText('evaluate arith-sl@100')).toBeChecked()
    expect(screen.getByLabelText('Algorithm')).toHaveValue('eval')
    // a library model as the baseline: it is not offered as B
    await user.clear(screen.getByLabelText('Baseline (A)'))
    await user.type(screen.getByLabelText('Baseline (A)'), 'mdl_b')
    expect(screen.getByLabelText('evaluate arith-sl@50')).toBeDisabled()
    expect(screen.getByTestId('request-preview')).toHaveTextContent('"base_model": "mdl_b"')
  })
})

