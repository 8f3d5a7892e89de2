import { describe, expect, test } from 'vitest'
import type { Job, LearnChoice, ModelDetail } from './learn'
import { IDLE, isBusy, lastPrompt, learnReducer, lineageLine, pickBefore, switchModel, type Exchange, type LearnEvent, type LearnRequest, type LearnState } from './learnFlow'
import type { Dataset } from './saveFeedback'

const dataset = { id: 'ds_pairs3', root_id: 'ds_pairs1', name: 'feedback-preferences', version: 3, num_rows: 18, kind: 'preferences', builtin: false } as Dataset
const choice: LearnChoice = { dataset, kind: 'preferences', wording: 'DPO on your A/B choices' }
const request: LearnRequest = { learner: 'mdl_1', learnerName: 'sums-sl', choice, steps: 30 }
const job = (state: string, step = 0, extra: Partial<Job> = {}) =>
  ({ id: 'job_9', state, step, total_steps: 30, reason: null, ...extra }) as unknown as Job
const model = {
  id: 'mdl_2', name: 'sums-sl+feedback',
  lineage: { parent_model: { id: 'mdl_1', name: 'sums-sl' }, dataset: { id: 'ds_pairs3', name: 'feedback-preferences' } },
} as unknown as ModelDetail
const before: Exchange = { model: 'mdl_1', context: [{ role: 'user', content: '7+8' }], answer: 'about 14' }

const run = (events: LearnEvent[], from: LearnState = IDLE) => events.reduce(learnReducer, from)

describe('the learn flow', () => {
  test('submit → the job trains → succeeds → model n+1 found: learned, on the new model, before kept', () => {
    let s = run([{ type: 'submit', request }])
    expect(s.phase).toBe('submitting')
    expect(isBusy(s)).toBe(true)
    s = run([{ type: 'job', job: job('queued') }, { type: 'job', job: job('running', 12) }], s)
    expect(s).toMatchObject({ phase: 'training', job: { step: 12 } })
    // A second learn waits for this one.
    expect(learnReducer(s, { type: 'submit', request: { ...request, steps: 5 } })).toBe(s)
    s = run([{ type: 'job', job: job('succeeded', 30) }], s)
    expect(s.phase).toBe('finding')
    s = run([{ type: 'found', model, before }], s)
    expect(s).toMatchObject({ phase: 'learned', model: { id: 'mdl_2' }, before, using: 'new' })
    expect(isBusy(s)).toBe(false)
    // Back to the old model and forward again; the pair stays.
    s = run([{ type: 'back' }], s)
    expect(s).toMatchObject({ phase: 'learned', using: 'old', before })
    expect(run([{ type: 'forward' }], s)).toMatchObject({ using: 'new' })
    expect(run([{ type: 'dismiss' }], s)).toBe(IDLE)
  })

  test("a failed job gives its reason, a cancelled one says so, a refused request has no job", () => {
    const training = run([{ type: 'submit', request }, { type: 'job', job: job('running', 4) }])
    expect(run([{ type: 'job', job: job('failed', 4, { reason: 'CUDA out of memory' }) }], training)).toMatchObject({
      phase: 'failed', reason: 'CUDA out of memory', job: { id: 'job_9' },
    })
    expect(run([{ type: 'job', job: job('cancelled', 4) }], training)).toMatchObject({ phase: 'failed', reason: 'the job was cancelled' })
    expect(run([{ type: 'submit', request }, { type: 'refused', reason: 'dataset_id: ds_x holds prompt_completion rows' }])).toEqual({
      phase: 'failed', request, job: null, reason: 'dataset_id: ds_x holds prompt_completion rows',
    })
    // The model of a succeeded job could not be read: failed, with the job to open.
    const finding = run([{ type: 'job', job: job('succeeded', 30) }], training)
    expect(run([{ type: 'lost', reason: 'no model' }], finding)).toMatchObject({ phase: 'failed', job: { state: 'succeeded' } })
    // Failed: a new learn can start.
    expect(run([{ type: 'job', job: job('failed', 4) }, { type: 'submit', request }], training).phase).toBe('submitting')
  })

  test("polls of another job, or late ones, change nothing; paused and interrupted jobs still train", () => {
    const training = run([{ type: 'submit', request }, { type: 'job', job: job('running', 4) }])
    expect(learnReducer(training, { type: 'job', job: job('failed', 1, { id: 'job_other' }) })).toBe(training)
    expect(run([{ type: 'job', job: job('interrupted', 4) }], training).phase).toBe('training')
    const finding = run([{ type: 'job', job: job('succeeded', 30) }], training)
    expect(learnReducer(finding, { type: 'job', job: job('running', 29) })).toBe(finding)
    expect(learnReducer(IDLE, { type: 'found', model, before })).toBe(IDLE)
    expect(learnReducer(training, { type: 'dismiss' })).toBe(training)
  })

  test("before is the learner's last answer, else the conversation's last", () => {
    const other: Exchange = { model: 'thinker/tiny', context: before.context, answer: '15' }
    expect(pickBefore([before, other], 'mdl_1')).toBe(before)
    expect(pickBefore([other], 'mdl_1')).toBe(other)
    expect(pickBefore([], 'mdl_1')).toBeNull()
    expect(lastPrompt([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: '7+8' }])).toBe('7+8')
  })

  test('the new model takes the learner’s place; back puts the old one back', () => {
    const chat = { model: 'mdl_1', a: 'mdl_1', b: 'thinker/tiny' }
    expect(switchModel(chat, 'chat', 'mdl_1', 'mdl_2')).toEqual({ model: 'mdl_2', a: 'mdl_2', b: 'thinker/tiny' })
    // The chat has one model: it switches even if another was picked meanwhile.
    expect(switchModel({ ...chat, model: 'mdl_7' }, 'chat', 'mdl_1', 'mdl_2').model).toBe('mdl_2')
    // A/B: the learner's side only.
    const ab = { model: 'mdl_7', a: 'thinker/tiny', b: 'mdl_1' }
    expect(switchModel(ab, 'ab', 'mdl_1', 'mdl_2')).toEqual({ model: 'mdl_7', a: 'thinker/tiny', b: 'mdl_2' })
    expect(switchModel(switchModel(ab, 'ab', 'mdl_1', 'mdl_2'), 'ab', 'mdl_2', 'mdl_1')).toEqual(ab)
  })

  test('the lineage line: parent → new model, the dataset version and rows, what it trained', () => {
    expect(lineageLine(model, request)).toEqual({
      parent: 'sums-sl', child: 'sums-sl+feedback',
      data: 'feedback-preferences v3 · 18 rows · DPO on your A/B choices · 30 steps',
    })
    const elsewhere = { ...model, lineage: { parent_model: null, dataset: { id: 'ds_z', name: null } } } as unknown as ModelDetail
    expect(lineageLine(elsewhere, request)).toMatchObject({ parent: 'sums-sl', data: expect.stringMatching(/^ds_z \(ds_z\)/) })
  })
})
