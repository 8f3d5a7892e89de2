import { describe, expect, test } from 'vitest'
import { allows, pauseNote } from './controls'
import type { Job } from './queries'

const job = (state: string, step: number, save_every?: number) =>
  ({ state, step, config: save_every === undefined ? {} : { save_every } }) as unknown as Job

describe('pauseNote', () => {
  test('before the first checkpoint a pause restarts from step 0', () => {
    expect(pauseNote(job('running', 12, 160))).toBe('No checkpoint yet (the first comes at step 160): paused now, it starts again from step 0.')
  })
  test('after checkpoints it names the step it resumes from', () => {
    expect(pauseNote(job('running', 350, 160))).toBe('Paused now, it resumes from step 320, the last checkpoint.')
  })
  test('says nothing where it cannot know or nothing runs', () => {
    expect(pauseNote(job('queued', 0, 160))).toBeNull()
    expect(pauseNote(job('running', 5))).toBeNull()
    expect(pauseNote(job('running', 5, 0))).toBeNull()
  })
})

describe('allows', () => {
  const of = (algorithm: string, state: string, retryable = false) =>
    ({ algorithm, state, retryable, step: 0, config: {} }) as unknown as Job
  test('a Tinker SDK run can be stopped while it runs, never paused or resumed', () => {
    expect(allows(of('tinker_sdk', 'running'), 'cancel')).toBe(true)
    expect(allows(of('tinker_sdk', 'running'), 'pause')).toBe(false)
    expect(allows(of('tinker_sdk', 'interrupted'), 'resume')).toBe(false) // the server says so
    expect(allows(of('sl', 'running'), 'pause')).toBe(true)
  })
})
