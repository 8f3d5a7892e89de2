// The Deployments tab, a deployment's page and the notice badge, against a fake server that
// answers as /api/deployments does (routes/deployments.py).
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { MemoryRouter } from 'react-router-dom'
import { beforeEach, describe, expect, test, vi } from 'vitest'
import { App } from '../../App'
import { renderAt, serve, type Sent } from '../../components/Datasets/testing'
import type { Deployment } from '../../components/Models/deployments'
import { useNoticesSeen } from '../../components/Models/noticesSeen'
import { deployment, ev } from '../../components/Models/testing'
import { useUiStore } from '../../state/ui'
import { DeploymentPage } from './DeploymentPage'
import { ModelListPage } from './ModelListPage'

const fetchMock = vi.hoisted(() => {
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

const model = (id: string, name: string, step = 20) => ({
  id, name, job_id: 'job_1', dataset_id: 'ds_1', base_model: 'thinker/tiny', backend: 'local', step, stage: null,
  sampler_path: `/srv/w/${id}`, state_path: null, metrics: {}, lifecycle: 'active', created_at: 1795672552.7,
})

const NOW = Date.now() / 1000
const HISTORY = [
  ev(NOW - 7200, 'skipped', '3 new feedback rows, fewer than min_feedback (10)'),
  ev(NOW - 3600, 'learning', '18 preferences rows, job job_l1'),
  ev(NOW - 3500, 'gating', 'mdl_b against mdl_a, job job_g1'),
  ev(NOW - 3000, 'promoted', 'sums-sl+feedback is better: 66% win rate [60%, 72%], p < 0.0001, n = 80 (12 ties, left out of the sign test)', {
    candidate: 'mdl_b', previous: 'mdl_a', eval_job_id: 'job_g1',
  }),
]

let served: Deployment
let none: boolean
let sent: Sent[]
beforeEach(() => {
  none = false
  localStorage.clear()
  useNoticesSeen.setState({ seen: {} })
  useUiStore.setState({ tourDone: true })
  served = deployment({ model_id: 'mdl_b', history: HISTORY, feedback_dataset_id: 'ds_fb2' })
  const other = deployment({
    name: 'support', model_id: 'mdl_a', log_traffic: false, redact: null, schedule: null, next_cycle_at: null, eval_dataset_id: null,
    traffic: 0, feedback: 0, feedback_new: 0, cycle: { stage: 'learning', learn_job_id: 'job_l2', rows: 12, dataset_id: 'ds_fb9' },
  })
  sent = serve(fetchMock, {
    'GET /api/health': () => ({ body: { version: '0.1', database: 'sqlite', gpus: 0, auth_required: false } }),
    'GET /api/deployments': () => ({ body: none ? [] : [served, other] }),
    'GET /api/deployments/assistant': () => ({ body: served }),
    'POST /api/deployments': (s) => {
      const body = s.body as { name: string }
      if (body.name === 'assistant') return { status: 409, body: { detail: 'deployment assistant exists; PATCH it' } }
      return { status: 201, body: deployment({ ...(s.body as object), history: [] }) }
    },
    'POST /api/deployments/assistant/cycle': () => {
      served = { ...served, history: [...served.history, ev(NOW, 'skipped', '4 new feedback rows, fewer than min_feedback (10)')] }
      return { body: served }
    },
    'POST /api/deployments/assistant/promote': (s) => {
      const { model_id } = s.body as { model_id: string }
      served = {
        ...served,
        cycle: { stage: 'gating', reason: 'asked', candidate: model_id, eval_job_id: 'job_g2' },
        history: [...served.history, ev(NOW, 'gating', `${model_id} against mdl_b, job job_g2`)],
      }
      return { body: served }
    },
    'PATCH /api/deployments/assistant': (s) => {
      served = { ...served, ...(s.body as object) }
      return { body: served }
    },
    'GET /api/models': () => ({ body: { data: [model('mdl_a', 'sums-sl'), model('mdl_b', 'sums-sl+feedback', 30), model('mdl_c', 'sums-sl@10', 10)], count: 3 } }),
    'GET /api/datasets': () => ({
      body: {
        data: [
          { id: 'ds_test', name: 'sums-test', version: 1, kind: 'chat', num_rows: 80 },
          { id: 'ds_pc', name: 'reversal', version: 2, kind: 'prompt_completion', num_rows: 400 },
          { id: 'ds_pairs', name: 'pairs', version: 1, kind: 'preferences', num_rows: 18 },
        ],
        count: 3,
      },
    }),
    'GET /api/jobs': () => ({ body: { data: [], count: 0 } }),
    'GET /api/jobs/job_l2': () => ({ body: { id: 'job_l2', state: 'running' } }),
    'GET /api/jobs/job_g2': () => ({ body: { id: 'job_g2', state: 'queued' } }),
  })
})

const posted = (path: string) => sent.filter((s) => s.method !== 'GET' && s.path === path).map((s) => s.body)

describe('the Deployments tab', () => {
  test('each deployment: served model, traffic, schedule in words, feedback, the cycle in flight or the latest event', async () => {
    renderAt(<ModelListPage />, '/models?view=deployments', '/models')
    const row = await screen.findByTestId('deployment-assistant')
    expect(within(row).getByRole('link', { name: 'assistant' })).toHaveAttribute('href', '/models/deployments/assistant')
    expect(within(row).getByRole('link', { name: 'sums-sl+feedback' })).toHaveAttribute('href', '/models/mdl_b')
    expect(row).toHaveTextContent('logged20 completions kept')
    expect(row).toHaveTextContent('every day at 03:00 UTC')
    expect(row).toHaveTextContent(/next (in \d+|due)/)
    expect(row).toHaveTextContent('4 new / 12')
    expect(row).toHaveTextContent(/Promoted50 min agonew/)

    const busy = screen.getByTestId('deployment-support')
    expect(busy).toHaveTextContent('not logged0 completions kept')
    expect(busy).toHaveTextContent('only when asked')
    expect(busy).toHaveTextContent('learning')
    expect(within(busy).getByRole('link', { name: 'job_l2' })).toHaveAttribute('href', '/training/job_l2')

    // The promotion not seen yet is counted on the tab.
    expect(screen.getByRole('tab', { name: 'Deployments, 1 new deployment notice' })).toHaveAttribute('aria-selected', 'true')
  })

  test('none yet: what a deployment is, and the way to make one', async () => {
    none = true
    renderAt(<ModelListPage />, '/models?view=deployments', '/models')
    expect(await screen.findByText('No deployment yet')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Create one →' })).toBeInTheDocument()
  })

  test('New deployment: the problems first, then the body sent, then its page', async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models?view=deployments', '/models')
    await user.click(await screen.findByRole('button', { name: 'New deployment' }))
    const dialog = screen.getByRole('dialog', { name: 'New deployment' })
    await user.click(within(dialog).getByRole('button', { name: 'Create deployment' }))
    expect(within(dialog).getByText('a name for apps to ask for')).toBeInTheDocument()
    expect(within(dialog).getByText('the library model it serves')).toBeInTheDocument()
    expect(posted('/api/deployments')).toEqual([])

    await user.type(within(dialog).getByLabelText('Name'), 'helper')
    await user.selectOptions(within(dialog).getByLabelText('Model'), 'mdl_a')
    await user.click(within(dialog).getByLabelText(/Log traffic/))
    await user.selectOptions(within(dialog).getByLabelText('Redact'), 'pii')
    await user.type(within(dialog).getByLabelText('Schedule (cron, UTC)'), '0 3 * * 1')
    expect(within(dialog).getByTestId('schedule-words')).toHaveTextContent('every Monday at 03:00 UTC')
    // The gate's eval set: datasets an eval job can answer, not preference pairs.
    const evalSet = within(dialog).getByLabelText('Eval set (the gate)')
    expect(within(evalSet).getAllByRole('option').map((o) => o.textContent)).toEqual([
      'none', 'sums-test v1 · chat · 80 rows', 'reversal v2 · prompt_completion · 400 rows',
    ])
    expect(within(dialog).getByText(/nothing is ever promoted/)).toBeInTheDocument()
    await user.selectOptions(evalSet, 'ds_test')
    await user.clear(within(dialog).getByLabelText('Min feedback'))
    await user.type(within(dialog).getByLabelText('Min feedback'), '20')
    await user.click(within(dialog).getByRole('button', { name: 'Create deployment' }))

    await waitFor(() => expect(screen.getByTestId('navigated')).toHaveTextContent('/models/deployments/helper'))
    expect(posted('/api/deployments')).toEqual([{
      name: 'helper', model_id: 'mdl_a', log_traffic: true, redact: 'pii', retention_days: 30, schedule: '0 3 * * 1',
      min_feedback: 20, learn_steps: 30, eval_dataset_id: 'ds_test',
    }])
  })

  test("the server's refusal is shown as it says it", async () => {
    const user = userEvent.setup()
    renderAt(<ModelListPage />, '/models?view=deployments&deploy=mdl_b', '/models')
    // A model page's Deploy opens the dialog on that model.
    const dialog = await screen.findByRole('dialog', { name: 'New deployment' })
    await waitFor(() => expect(within(dialog).getByLabelText('Model')).toHaveValue('mdl_b'))
    await user.type(within(dialog).getByLabelText('Name'), 'assistant')
    await user.click(within(dialog).getByRole('button', { name: 'Create deployment' }))
    expect(await within(dialog).findByText(/^Not created/)).toHaveTextContent('Not created: deployment assistant exists; PATCH it')
  })
})

describe("a deployment's page", () => {
  const open = () => renderAt(<DeploymentPage />, '/models/deployments/assistant', '/models/deployments/:name')

  test('the history as notifications, newest first, coloured by outcome, with models and jobs linked', async () => {
    open()
    const history = await screen.findByRole('list', { name: 'history' })
    const items = within(history).getAllByRole('listitem')
    expect(items.map((i) => i.dataset.testid)).toEqual(['event-promoted', 'event-gating', 'event-learning', 'event-skipped'])
    expect(items.map((i) => i.dataset.tone)).toEqual(['ok', 'accent', 'accent', 'neutral'])
    const [promoted, gating, learning, skipped] = items
    expect(within(promoted).getByTestId('event-detail')).toHaveTextContent(/^sums-sl\+feedback is better: 66% win rate \[60%, 72%\], p < 0.0001/)
    expect(within(promoted).getByTestId('event-models')).toHaveTextContent('sums-sl → sums-sl+feedback now served')
    expect(within(promoted).getByRole('link', { name: 'sums-sl' })).toHaveAttribute('href', '/models/mdl_a')
    expect(within(promoted).getByRole('link', { name: 'job_g1 →' })).toHaveAttribute('href', '/training/job_g1')
    expect(within(gating).getByRole('link', { name: 'job_g1 →' })).toBeInTheDocument()
    expect(within(learning).getByRole('link', { name: 'job_l1 →' })).toHaveAttribute('href', '/training/job_l1')
    expect(skipped).toHaveTextContent('Skipped')
    expect(skipped).toHaveTextContent('2 h ago')

    expect(screen.getByTestId('served-model')).toHaveTextContent('sums-sl+feedback')
    const figures = screen.getByLabelText('figures')
    expect(figures).toHaveTextContent('completions kept20')
    expect(figures).toHaveTextContent('feedback new / kept4 / 12a cycle needs 10')
    expect(within(figures).getByRole('link', { name: 'sums-test v1' })).toHaveAttribute('href', '/datasets/ds_test')
    expect(screen.getByText(/retrains every day at 03:00 UTC, next/)).toBeInTheDocument()
    expect(screen.getByTestId('call-snippet')).toHaveTextContent(/curl -s http:\/\/localhost(:\d+)?\/v1\/chat\/completions/)
    expect(screen.getByTestId('call-snippet')).toHaveTextContent('"model": "assistant"')
    expect(screen.getByTestId('call-snippet')).toHaveTextContent('/api/deployments/assistant/feedback')
  })

  test('a refusal is amber with the verdict; a failure red', async () => {
    served = {
      ...served,
      history: [
        ev(NOW - 60, 'failed', 'learn job job_x9 failed: CUDA out of memory'),
        ev(NOW - 30, 'refused', 'No significant difference between sums-sl+feedback and sums-sl@10: 52% win rate', { candidate: 'mdl_c', eval_job_id: 'job_g3' }),
      ],
    }
    open()
    const [refused, failed] = within(await screen.findByRole('list', { name: 'history' })).getAllByRole('listitem')
    expect(refused).toHaveAttribute('data-tone', 'warn')
    expect(refused).toHaveTextContent('Refused by the gate')
    expect(within(refused).getByTestId('event-models')).toHaveTextContent('sums-sl@10 not served; the served model stays')
    expect(failed).toHaveAttribute('data-tone', 'bad')
    expect(within(failed).getByRole('link', { name: 'job_x9 →' })).toBeInTheDocument()
  })

  test('Run cycle now: POSTed, and what it did is said and heads the history', async () => {
    const user = userEvent.setup()
    open()
    await user.click(await screen.findByRole('button', { name: 'Run cycle now' }))
    expect(await screen.findByTestId('cycle-answer')).toHaveTextContent('Skipped: 4 new feedback rows, fewer than min_feedback (10)')
    expect(posted('/api/deployments/assistant/cycle')).toEqual([null])
    expect(within(screen.getByRole('list', { name: 'history' })).getAllByRole('listitem')[0]).toHaveAttribute('data-testid', 'event-skipped')
  })

  test('Promote a model…: the gate explained, the served model not offered, then the cycle in flight', async () => {
    const user = userEvent.setup()
    open()
    await user.click(await screen.findByRole('button', { name: 'Promote a model…' }))
    const dialog = screen.getByRole('dialog', { name: 'Promote a model' })
    expect(dialog).toHaveTextContent('served only if it wins the A/B: significantly better (p < 0.05, a win rate above 50%)')
    const select = within(dialog).getByLabelText('Model to promote')
    await waitFor(() => expect(within(select).getAllByRole('option')).toHaveLength(3))
    expect(within(select).queryByRole('option', { name: /^sums-sl\+feedback/ })).toBeNull()
    await user.selectOptions(select, 'mdl_c')
    await user.click(within(dialog).getByRole('button', { name: 'Put it through the gate' }))
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument())
    expect(posted('/api/deployments/assistant/promote')).toEqual([{ model_id: 'mdl_c' }])
    const cycle = await screen.findByRole('status', { name: 'Cycle in flight' })
    expect(cycle).toHaveTextContent(/^Gating: an eval job puts the served model \(A\) against the candidate \(B\)/)
    expect(within(cycle).getByRole('link', { name: 'job_g2' })).toHaveAttribute('href', '/training/job_g2')
    expect(within(cycle).getByRole('link', { name: 'sums-sl@10' })).toHaveAttribute('href', '/models/mdl_c')
    expect(await within(cycle).findByText('queued')).toBeInTheDocument()
    // One cycle at a time.
    expect(screen.getByRole('button', { name: 'Run cycle now' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Promote a model…' })).toBeDisabled()
  })

  test('settings: Save PATCHes only what changed', async () => {
    const user = userEvent.setup()
    open()
    const form = await screen.findByRole('form', { name: 'settings' })
    const save = within(form).getByRole('button', { name: 'Save changes' })
    expect(save).toBeDisabled()
    await user.clear(within(form).getByLabelText('Schedule (cron, UTC)'))
    expect(within(form).getByTestId('schedule-words')).toHaveTextContent('only when asked')
    await user.clear(within(form).getByLabelText('Min feedback'))
    await user.type(within(form).getByLabelText('Min feedback'), '0')
    expect(within(form).getByText('at least 1')).toBeInTheDocument()
    expect(save).toBeDisabled()
    await user.type(within(form).getByLabelText('Min feedback'), '5')
    await user.click(save)
    await waitFor(() => expect(posted('/api/deployments/assistant')).toEqual([{ schedule: null, min_feedback: 5 }]))
    expect(await screen.findByText('Saved.')).toBeInTheDocument()
    expect(screen.getByText(/retrains only when asked/)).toBeInTheDocument()
  })
})

describe('the notice badge', () => {
  test('on Models and the tab until the deployment is opened; remembered in this browser', async () => {
    const user = userEvent.setup()
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
    render(
      <QueryClientProvider client={client}>
        <MemoryRouter initialEntries={['/models?view=deployments']}>
          <App />
        </MemoryRouter>
      </QueryClientProvider>,
    )
    expect(await screen.findByRole('link', { name: 'Models, 1 new deployment notice' })).toHaveAttribute('href', '/models')
    expect(await screen.findByRole('tab', { name: 'Deployments, 1 new deployment notice' })).toBeInTheDocument()
    await user.click(await screen.findByRole('link', { name: 'assistant' }))
    expect(await screen.findByRole('list', { name: 'history' })).toBeInTheDocument()
    await waitFor(() => expect(screen.queryByTestId('notice-badge')).toBeNull())
    expect(screen.getByRole('link', { name: 'Models' })).toBeInTheDocument()
    expect(JSON.parse(localStorage.getItem('thinker-deployment-notices-seen') ?? '{}').state.seen).toEqual({ assistant: NOW - 3000 })
  })
})
