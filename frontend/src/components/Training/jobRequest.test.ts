import { describe, expect, test } from 'vitest'
import type { JobProposal } from './contract'
import type { Job } from './queries'
import { autoResumeError, buildJobRequest, formErrors, formFromJob, formFromSearch, gpusError, initialForm, maxEvalModels, proposalRequest, scorerTypes } from './jobRequest'
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

describe('an eval job', () => {
  const form = { ...initialForm('eval'), datasetId: 'ds_test', evalModels: ['mdl_a', 'mdl_b'] }

  test('the baseline, the models to compare, the scorer and the settings as typed; no proposal asked', () => {
    const { body, problems } = buildJobRequest({ ...form, params: { max_tokens: '16', samples: '2', temperature: '0.7', max_examples: '' } })
    expect(problems).toEqual([])
    expect(body).toEqual({
      algorithm: 'eval', backend: 'local', base_model: 'thinker/tiny', dataset_id: 'ds_test', priority: 0, gpus: 1, auto_resume: 2,
      config: { max_tokens: 16, samples: 2, temperature: 0.7, models: ['mdl_a', 'mdl_b'], scorer: { type: 'exact_match' } },
    })
    expect(proposalRequest(form, {})).toBeNull()
    expect(formErrors({ ...form, params: { samples: '0', alpha: '1', max_examples: '2.5' } }, undefined)).toEqual({
      samples: 'Must be at least 1.',
      alpha: 'Must be less than 1.',
      max_examples: 'Must be a whole number.',
    })
  })

  test('a regex scorer sends its pattern, a python one its function; each is needed', () => {
    expect(buildJobRequest({ ...form, scorer: 'regex', scorerPattern: '^\\d+$' }).body?.config).toMatchObject({ scorer: { type: 'regex', pattern: '^\\d+$' } })
    expect(buildJobRequest({ ...form, scorer: 'regex' }).problems).toEqual(['config.scorer.pattern: a regex scorer needs a pattern'])
    expect(buildJobRequest({ ...form, scorer: 'python', scorerFunction: ' my_rewards:score ' }).body?.config).toMatchObject({ scorer: { type: 'python', function: 'my_rewards:score' } })
    expect(buildJobRequest({ ...form, scorer: 'python', scorerFunction: 'score' }).problems).toEqual(['config.scorer.function: a python scorer needs its function, as "module:function"'])
    expect(buildJobRequest({ ...form, scorer: 'reward_model', scorerRewardModel: ' mdl_judge ' }).body?.config).toMatchObject({ scorer: { type: 'reward_model', reward_model: 'mdl_judge' } })
    expect(buildJobRequest({ ...form, scorer: 'reward_model' }).problems).toEqual(["config.scorer.reward_model: a reward_model scorer needs its reward model (mdl_… of an RLHF job's rm stage)"])
    expect(buildJobRequest({ ...form, scorer: 'llm_judge', scorerJudgeModel: 'gpt-x', scorerJudgeUrl: 'https://judge.example/v1' }).body?.config).toMatchObject({ scorer: { type: 'llm_judge', judge_model: 'gpt-x', judge_url: 'https://judge.example/v1' } })
    expect(buildJobRequest({ ...form, scorer: 'llm_judge' }).problems).toEqual(['config.scorer.judge_model: an llm_judge scorer needs its judge model'])
    // the pattern of a scorer that is not regex is not sent
    expect(buildJobRequest({ ...form, scorer: 'nll', scorerPattern: 'x' }).body?.config).toMatchObject({ scorer: { type: 'nll' } })
    // the JSON editor's scorer keys are merged into the form's
    expect(buildJobRequest({ ...form, extraJson: '{"scorer": {"timeout_s": 3}, "nll": false}' }).body?.config).toMatchObject({ scorer: { type: 'exact_match', timeout_s: 3 }, nll: false })
  })

  test('at least one model to compare; not the baseline, none twice', () => {
    expect(buildJobRequest({ ...form, evalModels: [] }).problems).toEqual(['config.models: choose at least one model to compare with the baseline'])
    expect(buildJobRequest({ ...form, evalModels: ['thinker/tiny'] }).problems).toEqual(['config.models: thinker/tiny is the baseline already; compare it with other models'])
    expect(buildJobRequest({ ...form, extraJson: '{"models": ["mdl_a", "mdl_a"]}' }).problems).toEqual(['config.models: mdl_a is chosen twice'])
    // models given in the JSON editor stand for the form's
    expect(buildJobRequest({ ...form, evalModels: [], extraJson: '{"models": [{"model": "Qwen/Qwen3-0.6B", "name": "qwen"}]}' }).body?.config).toMatchObject({ models: [{ model: 'Qwen/Qwen3-0.6B', name: 'qwen' }] })
  })

  test('the scorers and the most models come from the server\'s schema', () => {
    expect(scorerTypes()).toEqual(['exact_match', 'regex', 'code', 'python', 'nll', 'reward_model', 'llm_judge'])
    expect(maxEvalModels()).toBe(7)
  })

  test('a new eval job from an ended one: the baseline and the models by library id, the scorer in its fields', () => {
    const ended = formFromJob(job({
      state: 'succeeded', algorithm: 'eval', base_model: 'thinker/tiny', dataset_id: 'ds_test',
      config: {
        models: [
          { model: '/srv/runs/job_0/sampler_weights/000020', name: 'arith-sl@20', id: 'mdl_base', base_model: 'thinker/tiny' },
          { model: '/srv/runs/job_0/sampler_weights/000100', name: 'arith-sl@100', id: 'mdl_a', base_model: 'thinker/tiny' },
          { model: 'Qwen/Qwen3-0.6B' },
        ],
        scorer: { type: 'regex', pattern: '^7$', timeout_s: 3 },
        max_tokens: 16, seed: 2,
      },
    }) as Job)
    expect(ended.algorithm).toBe('eval')
    expect(ended.baseModel).toBe('mdl_base')
    expect(ended.evalModels).toEqual(['mdl_a', 'Qwen/Qwen3-0.6B'])
    expect([ended.scorer, ended.scorerPattern]).toEqual(['regex', '^7$'])
    expect(ended.params).toEqual({ max_tokens: '16' })
    expect(JSON.parse(ended.extraJson)).toEqual({ seed: 2, scorer: { timeout_s: 3 } })
    // sent again, it is the same job: the baseline is not among the models
    expect(buildJobRequest(ended).body?.config).toEqual({ max_tokens: 16, models: ['mdl_a', 'Qwen/Qwen3-0.6B'], scorer: { type: 'regex', pattern: '^7$', timeout_s: 3 }, seed: 2 })
  })

  test('a link opens the form with a model against its base model', () => {
    const linked = formFromSearch(new URLSearchParams('algorithm=eval&base_model=Qwen/Qwen3-0.6B&models=mdl_a,mdl_b,mdl_a,Qwen/Qwen3-0.6B&backend=tinker&dataset_id=ds_test'))
    expect(linked).toMatchObject({ algorithm: 'eval', backend: 'tinker', baseModel: 'Qwen/Qwen3-0.6B', evalModels: ['mdl_a', 'mdl_b'], datasetId: 'ds_test' })
    expect(formFromSearch(new URLSearchParams(''))).toEqual(initialForm('sl'))
    expect(formFromSearch(new URLSearchParams('algorithm=nonsense')).algorithm).toBe('sl')
    // a reward model's Retrain link; a review starts from the model's page, not the form
    expect(formFromSearch(new URLSearchParams('algorithm=rm&base_model=mdl_rm'))).toMatchObject({ algorithm: 'rm', baseModel: 'mdl_rm' })
    expect(formFromSearch(new URLSearchParams('algorithm=review')).algorithm).toBe('sl')
  })
})
