// The rollout inspector on a hand-built step (./testing.ts): episodes turn by turn, the token
// colours, the filters, the histograms' counts, and a line from before episodes.
import { render, screen, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { describe, expect, test } from 'vitest'
import { colourOf } from './colour'
import { RolloutInspector } from './RolloutInspector'
import { oldLine, stepLines } from './testing'
import { parseGroups } from './types'

const show = (lines = stepLines()) => render(<RolloutInspector groups={parseGroups(lines)} step={7} />)
const group = (n: number) => screen.getByRole('article', { name: `Group ${n}` })
const shownGroups = () => screen.queryAllByTestId('rollout-group').map((g) => g.getAttribute('aria-label'))
const bars = (name: string) => within(screen.getByRole('figure', { name })).getAllByRole('listitem').map((b) => b.getAttribute('aria-label'))
const styleOf = (el: HTMLElement) => el.getAttribute('style') ?? ''

async function open(groupNumber: number, completion: number) {
  const row = within(group(groupNumber)).getAllByTestId('completion')[completion - 1]
  await userEvent.click(within(row).getByRole('button'))
  return within(group(groupNumber)).getAllByTestId('episode').at(-1) as HTMLElement
}

describe('the rollout inspector', () => {
  test('a multi-turn episode: turns by role, the tool call with its arguments, its result, version', async () => {
    show()
    const episode = within(await open(2, 1))
    const turns = episode.getAllByRole('listitem').map((t) => t.getAttribute('aria-label'))
    expect(turns).toEqual(['turn 1: policy', 'turn 2: tool result', 'turn 3: policy', 'turn 4: environment'])
    const call = episode.getByTestId('tool-call')
    expect(call).toHaveTextContent('call calculator')
    expect(call).toHaveTextContent('"expression": "1234+5678"')
    expect(episode.getByTestId('turn-tool')).toHaveTextContent('6912')
    expect(episode.getByTestId('turn-environment')).toHaveTextContent('correct')
    // each policy turn shows its own sampled tokens
    const [first, second] = episode.getAllByTestId('token-view')
    expect(within(first).getAllByTestId('token').map((t) => t.textContent)).toEqual(['<tool_call>', 'calculator', '1234+5678'])
    expect(within(second).getAllByTestId('token').map((t) => t.textContent)).toEqual(['6912', '<|im_end|>'])
    expect(episode.getByTestId('episode-version')).toHaveTextContent('version 2')
    expect(episode.getByText('not truncated')).toBeInTheDocument()
    expect(episode.queryByTestId('turn-error')).toBeNull()
  })

  test('a malformed tool call: the error as the environment saw it, on the policy turn', async () => {
    show()
    const episode = within(await open(2, 2))
    const policy = episode.getByRole('listitem', { name: 'turn 1: policy' })
    expect(within(policy).getByTestId('turn-error')).toHaveTextContent('a <tool_call> was opened and never closed with </tool_call>')
    expect(within(policy).queryByTestId('tool-call')).toBeNull()
    expect(episode.getByTestId('turn-tool')).toHaveTextContent('tool error:')
    expect(episode.getByTestId('turn-user')).toHaveTextContent('Answer with a number.')
  })

  test('a truncated episode says so, in its row and when opened', async () => {
    show()
    const rows = within(group(1)).getAllByTestId('completion')
    expect(rows[1]).toHaveTextContent('truncated')
    expect(rows[0]).not.toHaveTextContent('truncated')
    const episode = within(await open(1, 2))
    expect(episode.getByText('truncated: hit the token or turn budget')).toBeInTheDocument()
    expect(episode.getByTestId('episode-version')).toHaveTextContent('version 3')
    // a newline and an empty token stay visible
    expect(episode.getAllByTestId('token').map((t) => t.textContent)).toEqual(['77', '777', '↵\n', '∅'])
  })

  test('colour by logprob, surprisal or gap: token backgrounds, the legend, and values on hover', async () => {
    show()
    const episode = await open(1, 1)
    const [seven, end] = within(episode).getAllByTestId('token')
    // logprob 0 is the scale's top (teal), −1 a fifth of the way down towards red
    expect(styleOf(seven)).toContain('rgba(20, 184, 166, 0.3)')
    expect(styleOf(end)).toContain(colourOf(-1, 'logprob'))
    expect(screen.getByTestId('colour-legend')).toHaveTextContent('0 certain')

    await userEvent.click(screen.getByRole('radio', { name: 'Surprisal' }))
    expect(screen.getByRole('radio', { name: 'Surprisal' })).toHaveAttribute('aria-checked', 'true')
    expect(styleOf(seven)).toContain('rgba(245, 158, 11, 0)') // surprisal 0: no colour
    expect(styleOf(end)).toContain(colourOf(1, 'surprisal'))
    expect(screen.getByTestId('colour-legend')).toHaveTextContent('≥ 5 surprising')

    await userEvent.click(screen.getByRole('radio', { name: 'Gap' }))
    // gap +0.2 (sampler surer): towards orange; gap 0: clear
    expect(styleOf(seven)).toContain(colourOf(0.2, 'gap'))
    expect(colourOf(0.2, 'gap')).toBe('rgba(249, 115, 22, 0.28)')
    expect(styleOf(end)).toContain('rgba(14, 165, 233, 0)')
    expect(screen.getByTestId('colour-legend')).toHaveTextContent('≥ +0.5 sampler surer')

    await userEvent.hover(seven)
    expect(within(episode).getByTestId('token-readout')).toHaveTextContent('"7" · logprob 0 · p 1 · surprisal 0 · trainer logprob -0.2 · gap 0.2')
    expect(end).toHaveAttribute('title', '"<|im_end|>" · logprob -1 · p 0.368 · surprisal 1 · trainer logprob -1 · gap 0')
  })

  test('a dropped group was not trained: its tokens have no gap', async () => {
    show()
    await userEvent.click(screen.getByRole('radio', { name: 'Gap' }))
    const episode = await open(3, 1)
    const [token] = within(episode).getAllByTestId('token')
    expect(styleOf(token)).toContain('transparent')
    expect(token).toHaveAttribute('title', expect.stringContaining('trainer logprob — (not trained) · gap —'))
    expect(within(episode).getByText('mean gap — (not trained)')).toBeInTheDocument()
  })

  test('each filter: its count, the groups it shows and the completions in them', async () => {
    show()
    const filter = (name: RegExp) => screen.getByRole('radio', { name })
    const rowsOf = (n: number) => within(group(n)).getAllByTestId('completion').map((r) => r.firstElementChild?.textContent)
    expect(filter(/^All/)).toHaveTextContent('All 4')
    expect(filter(/^Zero advantage/)).toHaveTextContent('2')
    expect(filter(/^Dropped/)).toHaveTextContent('1')
    expect(filter(/^Truncated/)).toHaveTextContent('1')
    expect(shownGroups()).toEqual(['Group 1', 'Group 2', 'Group 3', 'Group 4'])

    await userEvent.click(filter(/^Zero advantage/))
    expect(shownGroups()).toEqual(['Group 3', 'Group 4'])

    await userEvent.click(filter(/^Dropped/))
    expect(shownGroups()).toEqual(['Group 3'])
    expect(group(3)).toHaveTextContent('dropped: not trained')

    await userEvent.click(filter(/^Truncated/))
    expect(shownGroups()).toEqual(['Group 1'])
    expect(rowsOf(1)).toEqual(['2'])
    expect(group(1)).toHaveTextContent('1 of 2 completions shown')

    // every completion, best first, gathered into their groups
    await userEvent.click(filter(/^Highest reward/))
    expect(shownGroups()).toEqual(['Group 1', 'Group 2', 'Group 4', 'Group 3'])
    expect(rowsOf(1)).toEqual(['1', '2'])

    await userEvent.click(filter(/^Lowest reward/))
    expect(shownGroups()).toEqual(['Group 1', 'Group 3', 'Group 2', 'Group 4'])
    expect(rowsOf(1)).toEqual(['2', '1'])

    await userEvent.click(filter(/^All/))
    expect(shownGroups()).toHaveLength(4)
  })

  test('a filter that matches nothing says what to do', async () => {
    const lines = stepLines().filter((l) => l.dropped !== true)
    show(lines)
    await userEvent.click(screen.getByRole('radio', { name: /^Dropped/ }))
    expect(screen.getByText('No group matches this filter')).toBeInTheDocument()
  })

  test('the histograms count rewards, token lengths and mean gaps of the step', () => {
    show()
    const nonEmpty = (name: string) => bars(name).filter((b) => !b?.endsWith(': 0'))
    expect(nonEmpty('Reward')).toEqual(['0 to 0.1: 3', '0.2 to 0.3: 1', '0.5 to 0.6: 2', '0.9 to 1: 2'])
    expect(nonEmpty('Length (tokens)')).toEqual(['1 to 1.4: 2', '1.8 to 2.2: 4', '3.8 to 4.2: 1', '4.6 to 5: 1'])
    // six trained episodes (the dropped group's two have no trainer logprobs)
    const gaps = bars('Sampler − trainer gap')
    expect(gaps.map((b) => Number(b?.split(': ')[1])).reduce((a, b) => a + b, 0)).toBe(6)
    expect(gaps[0]).toMatch(/^-0.1 to -0.08: 1$/)
    expect(gaps.at(-1)).toMatch(/: 2$/)
    expect(screen.getByRole('figure', { name: 'Reward' })).toHaveTextContent('n 8 · mean 0.4')
    expect(screen.getByTestId('rollouts-summary')).toHaveTextContent('4 prompts · 8 completions · mean reward 0.4 · 1 dropped · 1 truncated')
    expect(screen.getByTestId('rollouts-summary')).toHaveTextContent('sampled from version 2–3')
  })

  test('a line from before episodes: completions, rewards and advantages as before, nothing to open', async () => {
    show([oldLine()])
    const row = within(group(1)).getAllByTestId('completion')
    expect(row.map((r) => r.textContent)).toEqual(['1nrs—10.5', '2rsn!—0-0.5'])
    expect(within(group(1)).queryByRole('button')).toBeNull()
    expect(screen.getByText(/This run recorded no episodes/)).toBeInTheDocument()
    expect(screen.queryByRole('radiogroup', { name: 'Colour tokens by' })).toBeNull()
    // lengths in characters; no gap histogram
    expect(bars('Length (characters)').filter((b) => !b?.endsWith(': 0'))).toEqual(['3 to 3.1: 1', '3.9 to 4: 1'])
    expect(screen.queryByRole('figure', { name: 'Sampler − trainer gap' })).toBeNull()
    expect(screen.getByTestId('rollouts-summary')).not.toHaveTextContent('truncated')
    await userEvent.click(screen.getByRole('radio', { name: /^Truncated/ }))
    expect(screen.getByText('No group matches this filter')).toBeInTheDocument()
  })
})
