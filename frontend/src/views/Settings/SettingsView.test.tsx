// The Settings view's stored keys, against a fake server that answers as /api/settings does
// (routes/settings.py): each key says only whether it is set, and is sent to its own endpoint.
import { screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { expect, test, vi } from 'vitest'
import { renderAt, serve } from '../../components/Datasets/testing'
import { SettingsView } from './SettingsView'

const fetchMock = vi.hoisted(() => {
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

test('the Tinker and judge keys: set or not, saved to their own endpoints, never shown; the judge key with its URL', async () => {
  const state = { tinker: true, judge: false }
  const sent = serve(fetchMock, {
    'GET /api/settings': () => ({
      body: {
        tinker_api_key_set: state.tinker, judge_api_key_set: state.judge, judge_url: state.judge ? 'https://judge.example/v1' : null,
        auth_required: false, host: '127.0.0.1',
        port: 8000, database: 'sqlite', data_dir: '/srv/thinker', model_pool_size: 2, max_upload_mb: 200,
        max_cpu_jobs: 1, max_remote_jobs: 4, cors_origins: [],
      },
    }),
    'GET /api/health': () => ({ body: { status: 'ok' } }),
    'GET /api/tokens': () => ({ body: { data: [] } }),
    'PUT /api/settings/judge-key': () => { state.judge = true; return { body: { judge_api_key_set: true } } },
  })
  const user = userEvent.setup()
  renderAt(<SettingsView />, '/settings')
  expect(await screen.findByTestId('tinker-key-status')).toHaveTextContent('set')
  expect(screen.getByTestId('judge-key-status')).toHaveTextContent('not set')
  await user.type(screen.getByLabelText('Judge endpoint API key'), ' sk-judge-1 ')
  const save = screen.getAllByRole('button', { name: 'Save' })[0]
  expect(save).toBeDisabled() // the endpoint it is for comes first
  await user.type(screen.getByLabelText('Judge endpoint URL'), 'https://judge.example/v1')
  await user.click(save)
  await waitFor(() => expect(screen.getByTestId('judge-key-status')).toHaveTextContent(/^\s*set$/))
  const put = sent.find((s) => s.method === 'PUT')
  expect(put).toMatchObject({ path: '/api/settings/judge-key', body: { api_key: 'sk-judge-1', url: 'https://judge.example/v1' } })
  expect(await screen.findByText('https://judge.example/v1')).toBeInTheDocument()
  expect(screen.getByLabelText('Judge endpoint API key')).toHaveValue('')
  expect(document.body.textContent).not.toContain('sk-judge-1')
})
