import { describe, expect, test } from 'vitest'
import {
  agreement,
  binRange,
  calibrationVerdict,
  checkpointLabel,
  isReviewJob,
  latestReview,
  preferred,
  promptMessages,
  retrainRequest,
  reviewRequest,
  share,
  withAnswer,
  type Review,
  type ReviewItem,
} from './review'

const item = (pair: number, extra: Partial<ReviewItem> = {}): ReviewItem => ({
  pair, line: pair + 1, prompt: [{ role: 'user', content: '3+4' }], a: '7', b: '8', uncertainty: 0.99, disagreement: 0.1,
  answer: null, label: null, p_a: null, p_mean: null, ...extra,
})

describe('a review job', () => {
  test('is told by its algorithm', () => {
    expect(isReviewJob({ algorithm: 'review' })).toBe(true)
    expect(isReviewJob({ algorithm: 'rm' })).toBe(false)
  })

  test('a checkpoint is named by its step, else by the last part of its path', () => {
    expect(checkpointLabel('/srv/runs/job_1/engine/sampler_weights/000100')).toBe('step 100')
    expect(checkpointLabel('tinker://run-1/sampler_weights/000020/')).toBe('step 20')
    expect(checkpointLabel('tinker://run-1/sampler_weights/final')).toBe('final')
  })

  test('the answer a probability prefers; the person against the dataset, once answered', () => {
    expect(preferred(0.7)).toBe('a')
    expect(preferred(0.2)).toBe('b')
    expect(preferred(0.5)).toBe('tie')
    expect(agreement({ answer: null, label: null })).toBeNull()
    expect(agreement({ answer: 'a', label: 'a' })).toBe('agree')
    expect(agreement({ answer: 'b', label: 'a' })).toBe('disagree')
    expect(agreement({ answer: 'tie', label: 'b' })).toBe('tie')
  })

  test("an answer takes its pair's place, and the answers are recounted", () => {
    const review: Review = { summary: null, answered: 1, data: [item(4, { answer: 'a', label: 'a', p_a: [0.6], p_mean: 0.6 }), item(9)] }
    const answered = withAnswer(review, item(9, { answer: 'tie', label: 'b', p_a: [0.4], p_mean: 0.4 }))
    expect(answered.answered).toBe(2)
    expect(answered.data.map((r) => r.pair)).toEqual([4, 9])
    expect(answered.data[1]).toMatchObject({ answer: 'tie', label: 'b', p_mean: 0.4 })
    // changed back: still two answered
    expect(withAnswer(answered, item(9, { answer: 'b', label: 'b', p_a: [0.4], p_mean: 0.4 })).answered).toBe(2)
  })

  test("a prompt's messages, their content as text", () => {
    expect(promptMessages([{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'hi' }] }])).toEqual([
      { role: 'system', text: 'be brief' },
      { role: 'user', text: '[{"type":"text","text":"hi"}]' },
    ])
  })

  test('shares, bins and the calibration verdict', () => {
    expect(share(0.625)).toBe('63%')
    expect(share(null)).toBe('—')
    expect(binRange({ low: 0.5, high: 0.6 })).toBe('50–60%')
    expect(binRange({ low: 0.9, high: 1 })).toBe('90–100%')
    expect(calibrationVerdict({ confidence: 0.9, accuracy: 0.7 })).toBe('overconfident')
    expect(calibrationVerdict({ confidence: 0.6, accuracy: 0.8 })).toBe('underconfident')
    expect(calibrationVerdict({ confidence: 0.72, accuracy: 0.7 })).toBe('calibrated')
  })

  test('the review shown first: the newest finished, else the newest', () => {
    const jobs = [{ id: 'job_3', state: 'running' as const }, { id: 'job_2', state: 'succeeded' as const }, { id: 'job_1', state: 'succeeded' as const }]
    expect(latestReview(jobs)?.id).toBe('job_2')
    expect(latestReview([{ id: 'job_4', state: 'failed' as const }])?.id).toBe('job_4')
    expect(latestReview([])).toBeNull()
  })

  test('the requests: a review of the model, its settings left out when empty; a retrain from the reviewed model', () => {
    expect(reviewRequest({ id: 'mdl_rm', backend: 'local' }, 'ds_pairs', { committee: '2', queue_size: ' ' })).toEqual({
      algorithm: 'review', backend: 'local', base_model: 'mdl_rm', dataset_id: 'ds_pairs', config: { committee: 2 },
    })
    expect(retrainRequest({ parent_model_id: 'mdl_rm', backend: 'tinker' }, 'ds_v2')).toEqual({
      algorithm: 'rm', backend: 'tinker', base_model: 'mdl_rm', dataset_id: 'ds_v2', config: {},
    })
  })
})
