// The rollouts panel against a fake GET /api/jobs/{id}/rollouts (server/routes/jobs.py,
// read_job_rollouts): the latest step by default, another step on request, back to following.
import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { Rollouts } from './Rollouts'
import { oldLine, stepLines } from './rollouts/testing'
import { answer, renderAt } from './testing'

const fetchMock = vi.hoisted(() => {
  const fn = vi.fn()
  globalThis.fetch = fn as unknown as typeof fetch
  return fn
})

afterEach(() => fetchMock.mockReset())

/** Step 1 is from before episodes (an old line), step 2 the hand-built step. */
function serve(steps: number[] = [1, 2]) {
  return answer(fetchMock, {
    'GET /api/jobs/job_1/rollouts': (q) => {
      const step = q.has('step') ? Number(q.get('step')) : (steps.at(-1) ?? null)
      return { body: { steps, step, data: step === null ? [] : step === 1 ? [oldLine()] : stepLines() } }
    },
  })
}

describe('the rollouts panel', () => {
  test('opens on the latest step, goes to another, and back to following the latest', async () => {
    const seen = serve()
    renderAt(<Rollouts jobId="job_1" live />, '/training/job_1')
    expect(await screen.findByTestId('rollouts-summary')).toHaveTextContent('4 prompts')
    expect(screen.getByRole('combobox', { name: 'Rollout step' })).toHaveValue('2')
    expect(screen.getByRole('button', { name: 'Latest (follows)' })).toHaveAttribute('aria-pressed', 'true')

    await userEvent.click(screen.getByRole('button', { name: 'Previous step' }))
    await waitFor(() => expect(screen.getByTestId('rollouts-summary')).toHaveTextContent('1 prompt ·'))
    expect(seen).toContain('GET /api/jobs/job_1/rollouts?step=1')
    expect(screen.getByRole('button', { name: 'Latest (follows)' })).toHaveAttribute('aria-pressed', 'false')
    expect(within(screen.getByRole('article', { name: 'Group 1' })).queryByRole('button')).toBeNull()

    await userEvent.click(screen.getByRole('button', { name: 'Latest (follows)' }))
    await waitFor(() => expect(screen.getByTestId('rollouts-summary')).toHaveTextContent('4 prompts'))
    expect(seen.filter((r) => r === 'GET /api/jobs/job_1/rollouts')).not.toHaveLength(0)
  })

  test('the filter and colour mode stay when the step changes', async () => {
    serve()
    renderAt(<Rollouts jobId="job_1" live={false} />, '/training/job_1')
    await userEvent.click(await screen.findByRole('radio', { name: /^Dropped/ }))
    await userEvent.click(screen.getByRole('radio', { name: 'Gap' }))
    await userEvent.selectOptions(screen.getByRole('combobox', { name: 'Rollout step' }), '1')
    await waitFor(() => expect(screen.getByTestId('rollouts-summary')).toHaveTextContent('1 prompt ·'))
    expect(screen.getByRole('radio', { name: /^Dropped/ })).toHaveAttribute('aria-checked', 'true')
    await userEvent.selectOptions(screen.getByRole('combobox', { name: 'Rollout step' }), '2')
    await waitFor(() => expect(screen.getByRole('radio', { name: 'Gap' })).toHaveAttribute('aria-checked', 'true'))
  })

  test('no step written yet: the empty state says when they come', async () => {
    serve([])
    renderAt(<Rollouts jobId="job_1" live />, '/training/job_1')
    expect(await screen.findByText('No rollouts yet')).toBeInTheDocument()
    expect(screen.getByText(/the first appear after step 1/)).toBeInTheDocument()
  })
})
