import { describe, expect, test } from 'vitest'
import { defaultChoice, learnBody, learnChoices, learnWording, parseSteps, progressFraction, progressLine, type Job } from './learn'
import type { Dataset } from './saveFeedback'

const ds = (id: string, kind: string, root: string | null = null, extra: Partial<Dataset> = {}) =>
  ({ id, kind, root_id: root, name: id.replace('ds_', ''), version: 1, num_rows: 4, builtin: false, ...extra }) as Dataset

describe('the learn dialog', () => {
  test('each kind of feedback says what it trains, in the words of what the person did', () => {
    expect(learnWording('preferences')).toBe('DPO on your A/B choices')
    expect(learnWording('chat')).toBe('SL on your good and edited answers')
    expect(learnWording('prompt_completion')).toMatch(/not feedback/)
    const choices = learnChoices([ds('ds_pairs', 'preferences')], [ds('ds_good', 'chat')])
    expect(choices.map((c) => [c.dataset.id, c.kind, c.wording])).toEqual([
      ['ds_pairs', 'preferences', 'DPO on your A/B choices'],
      ['ds_good', 'chat', 'SL on your good and edited answers'],
    ])
  })

  test('the default is the dataset feedback was last saved to, found by its lineage', () => {
    // ds_pairs3 is version 3 of the lineage rooted at ds_pairs1 (the newest, as listed).
    const choices = learnChoices(
      [ds('ds_example', 'preferences', null, { builtin: true }), ds('ds_pairs3', 'preferences', 'ds_pairs1')],
      [ds('ds_good2', 'chat', 'ds_good1'), ds('ds_other', 'chat')],
    )
    const none = { last: null, roots: {} }
    expect(defaultChoice(choices, { last: { kind: 'chat', root: 'ds_good1' }, roots: { preferences: 'ds_pairs1' } }, 'preferences')).toBe('ds_good2')
    // Nothing last: the remembered lineage of the mode's kind, then of the other kind.
    expect(defaultChoice(choices, { last: null, roots: { preferences: 'ds_pairs1', chat: 'ds_good1' } }, 'chat')).toBe('ds_good2')
    expect(defaultChoice(choices, { last: null, roots: { chat: 'ds_good1' } }, 'preferences')).toBe('ds_good2')
    // Nothing remembered: the person's own dataset of the mode's kind, never an example first.
    expect(defaultChoice(choices, none, 'preferences')).toBe('ds_pairs3')
    expect(defaultChoice(choices, none, 'chat')).toBe('ds_good2')
    // A remembered lineage that is gone falls through; only examples: nothing picked.
    expect(defaultChoice(choices, { last: { kind: 'chat', root: 'ds_deleted' }, roots: {} }, 'chat')).toBe('ds_good2')
    expect(defaultChoice(learnChoices([ds('ds_example', 'preferences', null, { builtin: true })], []), none, 'preferences')).toBeNull()
  })

  test('steps are a whole number from 1 to 10,000; the body leaves the rate and the name to the server', () => {
    expect(parseSteps('30')).toEqual({ steps: 30, error: null })
    expect(parseSteps(' 120 ')).toEqual({ steps: 120, error: null })
    expect(parseSteps('2.5').error).toMatch(/whole number/)
    expect(parseSteps('').error).toMatch(/whole number/)
    expect(parseSteps('0').error).toBe('1 to 10,000 steps')
    expect(parseSteps('10001').error).toBe('1 to 10,000 steps')
    expect(learnBody('ds_pairs3', 30)).toEqual({ dataset_id: 'ds_pairs3', max_steps: 30 })
  })

  test("a job's progress in one line", () => {
    const job = (state: string, step: number, total: number | null) => ({ state, step, total_steps: total, progress: null }) as unknown as Job
    expect(progressLine(job('queued', 0, 30))).toBe('queued, ahead of ordinary jobs')
    expect(progressLine(job('running', 12, 30))).toBe('step 12 / 30')
    expect(progressLine(job('running', 3, null))).toBe('step 3')
    expect(progressFraction(job('running', 12, 30))).toBe(0.4)
    expect(progressFraction(job('succeeded', 29, 30))).toBe(1)
  })
})
