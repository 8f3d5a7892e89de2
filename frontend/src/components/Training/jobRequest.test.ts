import { describe, expect, test } from 'vitest'
import type { JobProposal } from './contract'
import type { Job } from './queries'
import { autoResumeError, buildJobRequest, formErrors, formFromJob, gpusError, initialForm, proposalRequest } from './jobRequest'
import { job } from './testing'

const stage = (s: 'sl' | 'rm' | 'rl', train: number) => ({ stage: s, rows: train + 10, train_rows: train, steps: 5, config: {}, why: [] })
const RLHF_PROPOSAL: JobProposal = {
  algorithm: 'rlhf', base_model: 'thinker/tiny', parent_model_id: null, config: {}, total_steps: 15, warnings: [], train_rows: 90,
  stages: [stage('sl', 90), stage('rm', 36), stage('rl', 18)],
}

describe('the new-job form', () => {
  test('RLHF: each stage by its own rules, each batch bounded by its own data', () => {
    const form = {
      ...initialForm('rlhf'),
      params: { lora_rank: '0' },
      stageParams: { 'sl.batch_size': '64', 'rm.batch_size': '64', 'rl.groups_per_batch': '20', 'rl.group_size': '1' },
    }
    expect(formErrors(form, RLHF_PROPOSAL)).toEqual({
      lora_rank: 'Must be greater than 0.',
      'rm.batch_size': 'Larger than the 36 training rows: at most 36.',
      'rl.groups_per_batch': 'Larger than the 18 training rows: at most 18.',
      'rl.group_size': 'Must be at least 2.',
    })
  })

  test('the proposal is asked with the valid fields only, once the data is chosen', () => {
    const form = { ...initialForm('sl'), params: { batch_size: '8', learning_rate: 'abc' } }
    expect(proposalRequest(form, {})).toBeNull()
    const chosen = { ...form, datasetId: 'ds_1' }
    expect(proposalRequest(chosen, { learning_rate: 'x' })).toEqual({
      algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', config: { batch_size: 8 },
    })
  })

  test('empty fields are left out of the request: the server proposes them', () => {
    const { body } = buildJobRequest({ ...initialForm('sl'), datasetId: 'ds_1', params: { batch_size: '8', num_epochs: '' } })
    expect(body?.config).toEqual({ batch_size: 8 })
  })

  test('auto-resume retries: 2 by default (the server\'s), sent as auto_resume, 0 to 10 whole', () => {
    const form = { ...initialForm('sl'), datasetId: 'ds_1' }
    expect(form.autoResume).toBe('2')
    expect(buildJobRequest(form).body).toMatchObject({ auto_resume: 2 })
    expect(buildJobRequest({ ...form, autoResume: '0' }).body).toMatchObject({ auto_resume: 0 })
    expect(buildJobRequest({ ...form, autoResume: ' 10 ' }).body).toMatchObject({ auto_resume: 10 })
    // empty: left out, the server's default applies
    expect(buildJobRequest({ ...form, autoResume: '' }).body).not.toHaveProperty('auto_resume')
    for (const [raw, message] of [['11', 'Must be at most 10.'], ['-1', 'Must be at least 0.'], ['1.5', 'Must be a whole number.'], ['two', '"two" is not a number.']]) {
      expect(autoResumeError({ ...form, autoResume: raw })).toBe(message)
      expect(buildJobRequest({ ...form, autoResume: raw })).toEqual({ body: null, problems: [`auto_resume: ${message}`] })
    }
    // the proposal is asked all the same: auto_resume is not part of it
    expect(proposalRequest({ ...form, autoResume: '11' }, {})).toEqual({ algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', config: {} })
  })

  test('a new job from an ended one keeps its auto-resume retries', () => {
    expect(formFromJob(job({ state: 'failed', auto_resume: 0 }) as Job).autoResume).toBe('0')
    expect(formFromJob(job({ state: 'failed', auto_resume: 5 }) as Job).autoResume).toBe('5')
  })

  test('GPUs: 1 by default (the server\'s), sent as gpus, 1 to 8 whole', () => {
    const form = { ...initialForm('sl'), datasetId: 'ds_1' }
    expect(form.gpus).toBe('1')
    expect(buildJobRequest(form).body).toMatchObject({ gpus: 1 })
    expect(buildJobRequest({ ...form, gpus: ' 4 ' }).body).toMatchObject({ gpus: 4 })
    expect(buildJobRequest({ ...initialForm('dpo'), datasetId: 'ds_1', gpus: '8' }).body).toMatchObject({ gpus: 8 })
    // empty: left out, the server's default applies
    expect(buildJobRequest({ ...form, gpus: '' }).body).not.toHaveProperty('gpus')
    for (const [raw, message] of [['9', 'Must be at most 8.'], ['0', 'Must be at least 1.'], ['1.5', 'Must be a whole number.'], ['two', '"two" is not a number.']]) {
      expect(gpusError({ ...form, gpus: raw })).toBe(message)
      expect(buildJobRequest({ ...form, gpus: raw })).toEqual({ body: null, problems: [`gpus: ${message}`] })
    }
    // the proposal is asked all the same: gpus is not part of it
    expect(proposalRequest({ ...form, gpus: '9' }, {})).toEqual({ algorithm: 'sl', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', config: {} })
  })

  test('several GPUs: local sl, dpo, rl and batch jobs only', () => {
    const refused = 'Only local sl, dpo, rl and batch jobs use several GPUs.'
    expect(gpusError({ ...initialForm('rl'), gpus: '2' })).toBeNull()
    expect(gpusError({ ...initialForm('batch'), gpus: '2' })).toBeNull()
    for (const algorithm of ['rlhf'] as const) {
      const form = { ...initialForm(algorithm), datasetId: 'ds_1' }
      expect(form.gpus).toBe('1')
      expect(gpusError(form)).toBeNull()
      expect(gpusError({ ...form, gpus: '2' })).toBe(refused)
      expect(buildJobRequest({ ...form, gpus: '2' })).toEqual({ body: null, problems: [`gpus: ${refused}`] })
    }
    const tinker = { ...initialForm('sl'), backend: 'tinker' as const, baseModel: 'Qwen/Qwen3-8B', datasetId: 'ds_1' }
    expect(gpusError(tinker)).toBeNull()
    expect(gpusError({ ...tinker, gpus: '' })).toBeNull()
    expect(gpusError({ ...tinker, gpus: '2' })).toBe(refused)
    expect(gpusError({ ...initialForm('dpo'), gpus: '2' })).toBeNull()
  })

  test('a new job from an ended one keeps its GPUs', () => {
    expect(formFromJob(job({ state: 'failed' }) as Job).gpus).toBe('1')
    expect(formFromJob(job({ state: 'failed', gpus: 4 }) as Job).gpus).toBe('4')
  })

  test('from an RLHF job: stage fields, stage datasets, the rest in the JSON editor; no paths', () => {
    const form = formFromJob(job({ state: 'succeeded',
      algorithm: 'rlhf', dataset_id: 'ds_sl',
      config: {
        lora_rank: 16, seed: 1,
        sl: { batch_size: 8, dataset: '/srv/a.jsonl', warmup_steps: 2 },
        rm: { dataset_id: 'ds_p', learning_rate: 0.0003 },
        rl: { dataset_id: 'ds_q', group_size: 4, reward: { type: 'judge' } },
      },
    }) as Job)
    expect(form.algorithm).toBe('rlhf')
    expect([form.datasetId, form.rmDatasetId, form.rlDatasetId]).toEqual(['ds_sl', 'ds_p', 'ds_q'])
    expect(form.params).toEqual({ lora_rank: '16' })
    expect(form.stageParams).toEqual({ 'sl.batch_size': '8', 'rm.learning_rate': '0.0003', 'rl.group_size': '4' })
    expect(JSON.parse(form.extraJson)).toEqual({ seed: 1, sl: { warmup_steps: 2 }, rl: { reward: { type: 'judge' } } })
  })

  test('batch: its settings as typed (a choice and free text kept as text), no proposal asked', () => {
    const form = {
      ...initialForm('batch'),
      datasetId: 'ds_1',
      params: { task: 'fix', samples: '8', temperature: '0.9', confidence_threshold: '0.75', workers: '', system_prompt: '  Answer tersely.  ' },
      extraJson: '{"pool": "local"}',
    }
    expect(buildJobRequest(form)).toEqual({
      body: {
        algorithm: 'batch', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_1', priority: 0, gpus: 1, auto_resume: 2,
        config: { task: 'fix', samples: 8, temperature: 0.9, confidence_threshold: 0.75, system_prompt: 'Answer tersely.', pool: 'local' },
      },
      problems: [],
    })
    expect(proposalRequest(form, {})).toBeNull()
    // checked by the schema's rules, with no training rows to bound them
    expect(formErrors({ ...form, params: { samples: '0', confidence_threshold: '1.5', shard_size: '2.5' } }, undefined)).toEqual({
      samples: 'Must be at least 1.',
      confidence_threshold: 'Must be at most 1.',
      shard_size: 'Must be a whole number.',
    })
  })

  test('a new batch job from an ended one: its settings in the fields, the rest in the JSON editor', () => {
    const form = formFromJob(job({ state: 'succeeded', algorithm: 'batch', config: { task: 'review', samples: 6, system_prompt: 'Be brief.', pool: 'ray', dataset: '/srv/x.jsonl' } }) as Job)
    expect(form.algorithm).toBe('batch')
    expect(form.params).toEqual({ task: 'review', samples: '6', system_prompt: 'Be brief.' })
    expect(JSON.parse(form.extraJson)).toEqual({ pool: 'ray' })
  })
})
