import { describe, expect, test } from 'vitest'
import {
  agoWords,
  createBody,
  curlSnippet,
  cycleLine,
  emptyForm,
  formOf,
  formProblems,
  jobsIn,
  latestNotice,
  nextRunWords,
  scheduleWords,
  settingsPatch,
  timeline,
  unseenNotices,
} from './deployments'
import { deployment, ev } from './testing'

describe('the schedule in words', () => {
  test.each([
    [null, 'only when asked'],
    ['', 'only when asked'],
    ['0 3 * * *', 'every day at 03:00 UTC'],
    ['30 14 * * *', 'every day at 14:30 UTC'],
    ['0 3,15 * * *', 'every day at 03:00 and 15:00 UTC'],
    ['* * * * *', 'every minute'],
    ['*/15 * * * *', 'every 15 minutes'],
    ['0 * * * *', 'every hour, on the hour'],
    ['5 * * * *', 'every hour at :05'],
    ['0 */6 * * *', 'every 6 hours at :00'],
    ['0 3 * * 1', 'every Monday at 03:00 UTC'],
    ['0 3 * * 7', 'every Sunday at 03:00 UTC'],
    ['0 3 * * MON,thu', 'every Monday and Thursday at 03:00 UTC'],
    ['0 9 * * 1-5', 'every weekday (Monday to Friday) at 09:00 UTC'],
    ['0 9 * * 6,0', 'every Saturday and Sunday at 09:00 UTC'],
    ['0 3 1 * *', 'on day 1 of every month at 03:00 UTC'],
    ['0 3 1,15 * *', 'on day 1 and 15 of every month at 03:00 UTC'],
    ['@daily', 'every day at 00:00 UTC'],
    ['@hourly', 'every hour, on the hour'],
  ])('%s → %s', (cron, words) => {
    expect(scheduleWords(cron)).toBe(words)
  })

  test('what it cannot say is quoted as is', () => {
    expect(scheduleWords('0 3 * 6 *')).toBe('cron 0 3 * 6 * (UTC)')
    expect(scheduleWords('0 3 L * *')).toBe('cron 0 3 L * * (UTC)')
    expect(scheduleWords('0 0 3 * * *')).toBe('cron 0 0 3 * * * (UTC)')
    expect(scheduleWords('0 25 * * *')).toBe('cron 0 25 * * * (UTC)')
  })
})

describe('times', () => {
  test('the next run and the time since an event, roughly', () => {
    const now = 1_000_000
    expect(nextRunWords(null, now)).toBe('not scheduled')
    expect(nextRunWords(now + 3 * 3600 + 60, now)).toBe('in 3 h')
    expect(nextRunWords(now + 90, now)).toBe('in 2 min')
    expect(nextRunWords(now - 5, now)).toMatch(/^due/)
    expect(agoWords(now - 3, now)).toBe('just now')
    expect(agoWords(now - 40, now)).toBe('40 s ago')
    expect(agoWords(now - 3 * 86_400, now)).toBe('3 days ago')
  })
})

describe('the history as a timeline', () => {
  const history = [
    ev(100, 'skipped', '3 new feedback rows, fewer than min_feedback (10)'),
    ev(200, 'learning', '18 preferences rows, job job_aaa111'),
    ev(260, 'gating', 'mdl_b against mdl_a, job job_bbb222'),
    ev(300, 'promoted', 'assistant-cycle@30 is better: 66% win rate [60%, 72%], p < 0.0001, n = 80', { candidate: 'mdl_b', previous: 'mdl_a', eval_job_id: 'job_bbb222' }),
    ev(400, 'refused', 'No significant difference between a and b', { candidate: 'mdl_c', eval_job_id: 'job_ccc333' }),
    ev(400, 'failed', 'learn job job_ddd444 failed: out of memory'),
  ]

  test('newest first; at the same second, the later recorded first', () => {
    expect(timeline(history).map((e) => e.event)).toEqual(['failed', 'refused', 'promoted', 'gating', 'learning', 'skipped'])
  })

  test('a colour per outcome: promoted green, refused amber, failed red, skipped grey, the cycle steps accent', () => {
    const tones = Object.fromEntries(timeline(history).map((e) => [e.event, [e.tone, e.title]]))
    expect(tones).toEqual({
      promoted: ['ok', 'Promoted'],
      refused: ['warn', 'Refused by the gate'],
      failed: ['bad', 'Failed'],
      skipped: ['neutral', 'Skipped'],
      learning: ['accent', 'Learning'],
      gating: ['accent', 'Gating'],
    })
  })

  test('each names its jobs: the eval job, and those its detail mentions', () => {
    const jobs = Object.fromEntries(timeline(history).map((e) => [e.event, e.jobs]))
    expect(jobs).toEqual({
      failed: ['job_ddd444'], refused: ['job_ccc333'], promoted: ['job_bbb222'], gating: ['job_bbb222'], learning: ['job_aaa111'], skipped: [],
    })
    expect(jobsIn('gate job job_9f8e7d6c5b4a failed: job job_9f8e7d6c5b4a')).toEqual(['job_9f8e7d6c5b4a'])
  })

  test('the cycle in flight in a line', () => {
    expect(cycleLine({ stage: 'learning', rows: 18, learn_job_id: 'job_a' })).toBe('Learning: a learn job trains the candidate on 18 new feedback rows')
    expect(cycleLine({ stage: 'learning', rows: 1 })).toMatch(/on 1 new feedback row$/)
    expect(cycleLine({ stage: 'gating', candidate: 'mdl_b', eval_job_id: 'job_b' })).toMatch(/^Gating: an eval job/)
  })
})

describe('notices not seen yet', () => {
  const a = deployment({ name: 'a', history: [ev(100, 'learning', 'job job_1'), ev(200, 'promoted', 'B is better', { candidate: 'mdl_b' })] })
  const b = deployment({ name: 'b', history: [ev(150, 'refused', 'No significant difference')] })
  const c = deployment({ name: 'c', history: [ev(100, 'failed', 'gone'), ev(300, 'skipped', 'too few')] })
  const d = deployment({ name: 'd', history: [] })

  test('a deployment has one when its latest event is promoted, refused or failed', () => {
    expect(latestNotice(a)).toEqual({ name: 'a', event: 'promoted', at: 200, detail: 'B is better' })
    expect(latestNotice(b)?.event).toBe('refused')
    expect(latestNotice(c)).toBeNull()
    expect(latestNotice(d)).toBeNull()
  })

  test('seen: the latest event shown on its page is not counted again; a newer one is', () => {
    expect(unseenNotices([a, b, c, d], {}).map((n) => n.name)).toEqual(['a', 'b'])
    expect(unseenNotices([a, b, c, d], { a: 200 }).map((n) => n.name)).toEqual(['b'])
    expect(unseenNotices([a, b], { a: 199, b: 150 }).map((n) => n.name)).toEqual(['a'])
  })
})

describe('the form', () => {
  test("an empty form has the server's defaults; problems name the field", () => {
    const form = emptyForm()
    expect(form).toMatchObject({ logTraffic: false, redact: 'none', retentionDays: '30', minFeedback: '10', learnSteps: '30', schedule: '', evalDatasetId: '' })
    expect(formProblems(form, true)).toEqual({ name: 'a name for apps to ask for', modelId: 'the library model it serves' })
    expect(formProblems({ ...form, name: '1st', modelId: 'mdl_a' }, true)).toEqual({ name: expect.stringMatching(/^a letter/) })
    expect(formProblems({ ...form, name: 'assistant.v2', modelId: 'mdl_a' }, true)).toEqual({})
    // Editing: the name and model are not the form's.
    expect(formProblems(form, false)).toEqual({})
    expect(formProblems({ ...form, retentionDays: '0', minFeedback: '2.5', learnSteps: '20000' }, false)).toEqual({
      retentionDays: 'more than 0', minFeedback: 'a whole number', learnSteps: 'at most 10,000',
    })
    expect(formProblems({ ...form, retentionDays: 'x', minFeedback: '' }, false)).toEqual({ retentionDays: 'a number', minFeedback: 'a whole number' })
    expect(formProblems({ ...form, redact: 'function', redactFunction: 'scrub' }, false)).toEqual({ redactFunction: 'module:function' })
  })

  test('POST /api/deployments: every setting, empties as null', () => {
    const form = { ...emptyForm(), name: ' assistant ', modelId: 'mdl_a', logTraffic: true, redact: 'pii' as const, schedule: ' 0 3 * * * ', retentionDays: '7.5', evalDatasetId: 'ds_test' }
    expect(createBody(form)).toEqual({
      name: 'assistant', model_id: 'mdl_a', log_traffic: true, redact: 'pii', retention_days: 7.5, schedule: '0 3 * * *',
      min_feedback: 10, learn_steps: 30, eval_dataset_id: 'ds_test',
    })
    expect(createBody({ ...form, redact: 'function', redactFunction: 'hooks.pii:scrub', schedule: '', evalDatasetId: '' })).toMatchObject({
      redact: 'hooks.pii:scrub', schedule: null, eval_dataset_id: null,
    })
    expect(createBody({ ...form, redact: 'none', redactFunction: 'left:over' }).redact).toBeNull()
  })

  test('PATCH: only what changed; nothing when nothing did', () => {
    const d = deployment({ redact: 'hooks:scrub' })
    const form = formOf(d)
    expect(form).toMatchObject({ redact: 'function', redactFunction: 'hooks:scrub', schedule: '0 3 * * *', evalDatasetId: 'ds_test' })
    expect(settingsPatch(d, form)).toEqual({})
    expect(settingsPatch(d, { ...form, schedule: '', minFeedback: '5', logTraffic: false })).toEqual({ schedule: null, min_feedback: 5, log_traffic: false })
    expect(settingsPatch(d, { ...form, redact: 'pii', evalDatasetId: '' })).toEqual({ redact: 'pii', eval_dataset_id: null })
  })
})

describe('calling it', () => {
  test('curl: /v1 with the name as the model, then feedback by the answer id', () => {
    const text = curlSnippet('http://127.0.0.1:8000', 'assistant')
    expect(text).toContain(`curl -s http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{`)
    expect(text).toContain('"model": "assistant"')
    expect(text).toContain('curl -s -X POST http://127.0.0.1:8000/api/deployments/assistant/feedback')
    expect(text).toContain('"completion_id": "chatcmpl-…", "rating": "down", "correction": "7"')
    expect(text).not.toContain('Authorization')
    expect(curlSnippet('http://h', 'a', true).match(/Authorization: Bearer \$THINKER_TOKEN/g)).toHaveLength(2)
  })
})
