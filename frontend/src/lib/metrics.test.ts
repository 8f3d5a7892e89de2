import { describe, expect, test } from 'vitest'
import { METRICS, checkMetric, formatValue, metricInfo, primaryMetric } from './metrics'

describe('metric registry', () => {
  test('every metric the algorithms log is described with a healthy range', () => {
    const logged = [
      'train_mean_nll', 'eval_mean_nll', 'learning_rate', 'grad_norm', 'grad_clipped', 'num_tokens', 'num_sequences', 'step_time_s',
      'dpo_loss', 'accuracy', 'margin', 'chosen_reward', 'rejected_reward', 'num_pairs',
      'eval_dpo_loss', 'eval_accuracy', 'eval_margin', 'eval_chosen_reward', 'eval_rejected_reward',
      'reward_mean', 'reward_std', 'frac_groups_dropped', 'kl_to_base', 'entropy', 'completion_len_mean',
      'frac_terminated', 'sample_tokens_per_s', 'loss', 'kl_sample_train', 'num_datums', 'eval_reward_mean',
      'rm_train_nll', 'rm_train_accuracy', 'rm_eval_accuracy', 'rm_eval_prob_chosen', 'rm_eval_margin',
      'eval_win_rate_vs_sl', 'eval_judge_score_sl', 'eval_judge_score_rl',
      'inputs_done', 'inputs_total', 'answered', 'failed', 'flagged', 'applied', 'verified',
      'verification_failed', 'mean_confidence', 'shard_retries', 'actors_lost',
      'staleness_mean', 'staleness_max', 'frac_groups_stale', 'batch_wait_s', 'turns_mean', 'frac_truncated',
      'review_accuracy',
    ]
    for (const key of logged) {
      expect(METRICS[key], key).toBeDefined()
      expect(METRICS[key].meaning.length).toBeGreaterThan(10)
      expect(METRICS[key].healthy.length).toBeGreaterThan(1)
    }
  })

  test('unknown keys get a neutral description instead of crashing', () => {
    expect(metricInfo('new_metric').section).toBe('other')
    expect(checkMetric('new_metric', [1, 2])).toBeNull()
  })
})

describe('health checks', () => {
  test('NaN and infinities are always flagged', () => {
    expect(checkMetric('train_mean_nll', [2, Number.NaN])).toMatch(/not a finite number/)
    expect(checkMetric('loss', [0.1, Number.POSITIVE_INFINITY])).toMatch(/not a finite number/)
  })

  test('sampler-learner gap: near 0 synchronous, bounded when sampling ahead', () => {
    expect(checkMetric('kl_sample_train', [1e-6, 2e-6])).toBeNull()
    expect(checkMetric('kl_sample_train', [1e-6, 0.05])).toMatch(/disagree/)
    const ahead = { staleness_mean: [0, 2] }
    expect(checkMetric('kl_sample_train', [0.02, 0.11], ahead)).toBeNull()
    expect(checkMetric('kl_sample_train', [0.1, 0.4], ahead)).toMatch(/too stale/)
  })

  test('KL to base: safe, drifting, unstable', () => {
    expect(checkMetric('kl_to_base', [0.001, 0.005])).toBeNull()
    expect(checkMetric('kl_to_base', [0.01, 0.2])).toMatch(/drifting/)
    expect(checkMetric('kl_to_base', [0.01, 1.5])).toMatch(/unstable/)
  })

  test('DPO loss stuck at ln 2 after ten steps, but not at step 0', () => {
    expect(checkMetric('dpo_loss', [0.6931])).toBeNull()
    expect(checkMetric('dpo_loss', Array(12).fill(0.6931))).toMatch(/ln 2/)
    expect(checkMetric('dpo_loss', [0.69, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.08, 0.07])).toBeNull()
  })

  test('held-out NLL rising while training NLL falls is overfitting', () => {
    const train = [5, 3, 2, 1, 0.5, 0.2, 0.1]
    expect(checkMetric('eval_mean_nll', [5, 2, 1, 0.9], { train_mean_nll: train })).toBeNull()
    expect(checkMetric('eval_mean_nll', [5, 2, 1, 1.4], { train_mean_nll: train })).toMatch(/overfitting/)
  })

  test('RL: zero spread, most groups dropped, no completions trained', () => {
    expect(checkMetric('reward_std', [0.3, 0])).toMatch(/scored the same/)
    expect(checkMetric('reward_std', [0.3, 0.2])).toBeNull()
    expect(checkMetric('frac_groups_dropped', [0.2, 0.9])).toMatch(/above 0.5/)
    expect(checkMetric('frac_groups_dropped', [0.2, 0.3])).toBeNull()
    expect(checkMetric('num_datums', [64, 0])).toMatch(/every group was dropped/)
  })

  test('batch: an input failed on every retry, an actor lost', () => {
    expect(checkMetric('failed', [0, 0])).toBeNull()
    expect(checkMetric('failed', [0, 4])).toMatch(/failed after every retry/)
    expect(checkMetric('actors_lost', [0])).toBeNull()
    expect(checkMetric('actors_lost', [0, 1])).toMatch(/actors were lost/)
  })

  test('entropy collapse and gradient spikes are relative to the run itself', () => {
    expect(checkMetric('entropy', [2.0, 1.8, 1.5])).toBeNull()
    expect(checkMetric('entropy', [2.0, 1.0, 0.2])).toMatch(/collapsed/)
    expect(checkMetric('grad_norm', [400, 420, 380, 410, 5000])).toMatch(/spiked/)
    expect(checkMetric('grad_norm', [400, 420, 380, 410, 900])).toBeNull()
    expect(checkMetric('grad_clipped', [0, 1, 0, 0, 0, 0])).toBeNull()
    expect(checkMetric('grad_clipped', [0, 1, 1, 1, 0, 1])).toMatch(/most recent steps were clipped/)
  })

  test('one slow evaluation step is not a slowdown; a lasting one is', () => {
    const steady = [1, 1.1, 0.9, 1, 1, 1.2, 0.9, 1, 1, 1, 1, 1, 1, 4]
    expect(checkMetric('step_time_s', steady)).toBeNull()
    expect(checkMetric('step_time_s', [1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3])).toMatch(/twice as slow/)
  })

  test('DPO rejected reward above chosen means a negative margin', () => {
    expect(checkMetric('rejected_reward', [0, -0.5, 0.2], { chosen_reward: [0, -0.2, -0.1] })).toMatch(/above the chosen/)
    expect(checkMetric('rejected_reward', [0, -1, -2], { chosen_reward: [0, -0.2, -0.3] })).toBeNull()
  })

  test('judge accuracy near chance after step 0', () => {
    expect(checkMetric('rm_eval_accuracy', [0.18])).toBeNull()
    expect(checkMetric('rm_eval_accuracy', [0.18, 0.52])).toMatch(/near 0.5/)
    expect(checkMetric('rm_eval_accuracy', [0.18, 0.95])).toBeNull()
  })
})

describe('helpers', () => {
  test('the sparkline metric fits the algorithm', () => {
    expect(primaryMetric(['learning_rate', 'train_mean_nll'])).toBe('train_mean_nll')
    expect(primaryMetric(['accuracy', 'dpo_loss'])).toBe('dpo_loss')
    expect(primaryMetric(['loss', 'reward_mean'])).toBe('reward_mean')
    expect(primaryMetric(['inputs_done', 'flagged', 'mean_confidence'])).toBe('mean_confidence')
    expect(primaryMetric(['step_time_s'])).toBeNull()
  })

  test('values print compactly', () => {
    expect(formatValue(0.003)).toBe('0.003')
    expect(formatValue(0.00002)).toBe('2.00e-5')
    expect(formatValue(5.955334)).toBe('5.96')
    expect(formatValue(1200)).toBe('1,200')
    expect(formatValue(null)).toBe('—')
  })
})
