// Every metric the algorithms log (backend/thinker/algorithms/*.py, explained in
// TRAINING_GUIDE.md "Metrics"): what it means, its healthy range, and a check that says when a
// live value leaves that range. Charts, tooltips and warnings all read from here, so the words
// a user sees match the guide.

/** Where a metric's chart goes on the job page. */
export type MetricSection =
  | 'loss'
  | 'reward'
  | 'preference'
  | 'accuracy'
  | 'kl'
  | 'policy'
  | 'optimizer'
  | 'throughput'
  | 'batch'
  | 'answers'
  | 'evaluation'
  | 'review'
  | 'other'

/** All the series of one job, by metric key, oldest value first. */
export type SeriesMap = Readonly<Record<string, readonly number[]>>

/** A check: the metric's values (latest last) and every other series → a warning, or null. */
export type MetricCheck = (values: readonly number[], all: SeriesMap) => string | null

export interface MetricInfo {
  key: string
  label: string
  section: MetricSection
  /** Metrics with the same chart id share one chart (train and held-out, chosen and rejected). */
  chart: string
  meaning: string
  healthy: string
  check: MetricCheck
}

export const SECTIONS: { id: MetricSection; title: string; blurb: string }[] = [
  { id: 'loss', title: 'Loss', blurb: 'What the step minimises; lower is better, except RL loss.' },
  { id: 'reward', title: 'Reward', blurb: 'What RL optimises: the scores of the sampled completions.' },
  { id: 'preference', title: 'Preference margins', blurb: 'How far apart chosen and rejected answers are.' },
  { id: 'accuracy', title: 'Accuracy', blurb: 'How often the preferred answer wins.' },
  { id: 'kl', title: 'KL divergence', blurb: 'How far the policy moved from the base model or sampler.' },
  { id: 'policy', title: 'Policy', blurb: 'Entropy and shape of the sampled completions.' },
  { id: 'optimizer', title: 'Optimizer', blurb: 'Learning rate schedule and gradient size.' },
  { id: 'throughput', title: 'Throughput', blurb: 'Speed: tokens per second and time per step.' },
  { id: 'batch', title: 'Batch', blurb: 'What each step trained on.' },
  { id: 'answers', title: 'Answers', blurb: 'A batch job\'s work after each shard: inputs answered, flagged, applied; its pool.' },
  { id: 'evaluation', title: 'Evaluation', blurb: 'An eval job\'s models, one step each in order (the baseline first): mean score and NLL.' },
  { id: 'review', title: 'Review', blurb: 'A review job\'s committee, one step per checkpoint (the oldest first, the reviewed one last).' },
  { id: 'other', title: 'Other', blurb: 'Metrics without a description yet.' },
]

const LN2 = Math.log(2)

const last = (v: readonly number[]): number => v[v.length - 1]

function median(v: readonly number[]): number {
  if (v.length === 0) return NaN
  const s = [...v].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

/** Every check first rejects NaN and infinities: they always mean something broke. */
function finite(check: MetricCheck): MetricCheck {
  return (values, all) => {
    if (values.length === 0) return null
    const v = last(values)
    if (!Number.isFinite(v)) return 'not a finite number: the step diverged or nothing was measured'
    return check(values, all)
  }
}

const none: MetricCheck = () => null

/** A jump to `factor` × the median of the previous values (at least `min` of them). */
function spike(factor: number, min: number, message: string): MetricCheck {
  return (values) => {
    if (values.length <= min) return null
    const before = median(values.slice(-11, -1))
    return before > 0 && last(values) > factor * before ? message : null
  }
}

/** A lasting change of speed: the median of the last 5 values against the run's earlier
 * median, so one slow evaluation step or a noisy neighbour does not raise an alarm. */
function sustained(good: 'slower' | 'faster', message: string): MetricCheck {
  return (values) => {
    if (values.length < 10) return null
    const recent = median(values.slice(-5))
    const before = median(values.slice(0, -5))
    if (!(before > 0)) return null
    return (good === 'slower' ? recent > 2 * before : recent < before / 2) ? message : null
  }
}

/** The value stuck within `tol` of `at` after `after` values. */
function stuckAt(at: number, tol: number, after: number, message: string): MetricCheck {
  return (values) =>
    values.length >= after && values.slice(-5).every((v) => Math.abs(v - at) <= tol) ? message : null
}

function metric(
  key: string,
  label: string,
  section: MetricSection,
  meaning: string,
  healthy: string,
  check: MetricCheck = none,
  chart: string = key,
): MetricInfo {
  return { key, label, section, chart, meaning, healthy, check: finite(check) }
}

const nllRising: MetricCheck = (values) => {
  if (values.length < 6) return null
  const recent = median(values.slice(-6, -1))
  const low = Math.min(...values.slice(0, -1))
  return last(values) > 1.5 * recent && last(values) > low + 0.5
    ? 'jumped above its recent level: the learning rate may be too high'
    : null
}

const overfitting: MetricCheck = (values, all) => {
  if (values.length < 3) return null
  const best = Math.min(...values)
  const train = all.train_mean_nll ?? []
  const rising = last(values) > best * 1.1 + 0.02
  const trainFalling = train.length > 2 && last(train) < train[Math.floor(train.length / 2)]
  return rising && trainFalling
    ? 'rises while the training loss falls: overfitting; keep an earlier checkpoint'
    : null
}

const DEFINITIONS: MetricInfo[] = [
  // SL
  metric('train_mean_nll', 'Train NLL', 'loss',
    'Mean negative log-likelihood per trained token of the batch (nats), before the update; exp(nll) is the perplexity.',
    'Falls; a pretrained model starts near 1–3, a random one at ln(vocab) (5.95 for thinker/tiny).',
    (v, all) => nllRising(v, all) ?? (v.length > 5 && last(v) < 0.005 && (all.eval_mean_nll?.length ?? 0) === 0
      ? 'near 0: the model may be memorising; hold out data to check'
      : null),
    'nll'),
  metric('eval_mean_nll', 'Held-out NLL', 'loss',
    'The same NLL on the held-out set under the current weights, every eval_every steps.',
    'Falls with the training NLL, staying a little above it.', overfitting, 'nll'),
  // DPO
  metric('dpo_loss', 'DPO loss', 'loss',
    'Mean over pairs of −log σ(β·(c − r)), c and r the chosen and rejected log-ratios to the reference.',
    'Exactly ln 2 = 0.693 at step 0, then falling.',
    stuckAt(LN2, 0.003, 10, 'stuck at ln 2 = 0.693: nothing changes; raise the learning rate or max_length'),
    'dpo_loss'),
  metric('eval_dpo_loss', 'Held-out DPO loss', 'loss',
    'The DPO loss on the held-out pairs.', 'ln 2 at step 0, then falling.',
    (v, all) => {
      const train = all.dpo_loss ?? []
      return v.length >= 3 && last(v) > Math.min(...v) + 0.1 && train.length > 2 && last(train) < 0.1
        ? 'rises while the training loss is near 0: the model memorises the training pairs'
        : null
    },
    'dpo_loss'),
  // Reward model (RLHF stage 2)
  metric('rm_train_nll', 'Judge NLL', 'loss',
    'NLL of the judge\'s answer token ("A" or "B") over the batch, both orders of each pair; with head bradley_terry, the mean of −log σ(r_chosen − r_rejected).',
    'Falls below ln 2 = 0.693.',
    stuckAt(LN2, 0.02, 10, 'stuck at 0.69: the reward model has not learned which response is better'),
    'rm_nll'),
  metric('rm_train_accuracy', 'Pairs ranked right', 'accuracy',
    'Bradley-Terry head: the share of the step\'s pairs whose chosen response scored above the rejected one.',
    'Rises toward 1; compare with rm_eval_accuracy to see memorising.'),
  // RL
  metric('loss', 'Policy-gradient loss', 'loss',
    'The RL loss summed over trained tokens per completion. Not a progress measure: watch reward_mean.',
    'Around 0, of either sign.'),
  metric('reward_mean', 'Mean reward', 'reward',
    'Mean reward of every completion sampled this step.',
    'Rises, noisily. Its range depends on the reward (0–1 for code/regex). RLHF: 0.5 by construction.',
    (v) => v.length >= 6 && v.slice(-6).every((x) => x === v[v.length - 1])
      ? 'flat for 6 steps: no group carries signal (see frac_groups_dropped)'
      : null,
    'reward'),
  metric('eval_reward_mean', 'Held-out reward', 'reward',
    'Mean reward on held-out problems, sampled with fixed seeds so it is comparable step to step.',
    'Rises along with reward_mean.',
    (v, all) => {
      const train = all.reward_mean ?? []
      return v.length >= 3 && last(v) < v[0] && train.length > 3 && last(train) > train[0] + 0.1
        ? 'falls while the training reward rises: the policy fits its training prompts'
        : null
    },
    'reward'),
  metric('reward_std', 'Reward spread', 'reward',
    'Standard deviation of the rewards across all completions of the step.',
    'Above 0 (at most 0.5 for a 0/1 reward); falls towards 0 as the task is solved.',
    (v) => (last(v) === 0 ? '0: every completion scored the same, so the step trained nothing' : null)),
  metric('frac_groups_dropped', 'Groups dropped', 'reward',
    'Fraction of groups whose rewards were all equal (they carry no signal and are dropped).',
    'Below about 0.5.',
    (v) => (last(v) > 0.5
      ? 'above 0.5: most groups score alike; warm-start with SL or raise group_size'
      : null)),
  metric('kl_to_base', 'KL to base', 'kl',
    'Sampled per-token estimate of KL(policy ‖ base model without adapter), in nats.',
    '0.001–0.01 is safe; above 0.1 the policy drifts; above 1 it is unstable.',
    (v) => (last(v) > 1 ? 'above 1: unstable; set kl_coef or lower the learning rate'
      : last(v) > 0.1 ? 'above 0.1: the policy is drifting from the base model' : null)),
  metric('kl_sample_train', 'KL sampler vs learner', 'kl',
    'Mean of log q − log p over every sampled token of the trained groups: the sampler\'s logprob against the learner\'s.',
    'About 0 (below 1e-4 locally) with one substep, synchronous; sampling k steps ahead, it grows with k and the learning rate: below 0.3.',
    (v, all) => {
      const gap = Math.abs(last(v))
      const stale = all.staleness_mean ?? []
      if (stale.length > 0 && last(stale) > 0) {
        return gap > 0.3
          ? 'above 0.3: the samples are too stale for this learning rate; lower max_steps_off_policy or learning_rate'
          : null
      }
      return gap > 0.01
        ? 'clearly non-zero: sampler and learner disagree (fine only with num_substeps > 1)'
        : null
    }),
  metric('staleness_mean', 'Sample age', 'kl',
    'Asynchronous RL: how many steps old the weights that sampled the step\'s batch were (mean over its groups).',
    'max_steps_off_policy once the pipeline is full (fewer in the first steps); 0 synchronous.'),
  metric('staleness_max', 'Oldest sample', 'kl',
    'Asynchronous RL: the oldest group of the step, in steps.',
    'At most max_steps_off_policy.'),
  metric('frac_groups_stale', 'Groups too stale', 'batch',
    'Asynchronous RL: fraction of the step\'s groups older than max_steps_off_policy, dropped and sampled again from the current weights.',
    '0; only a resume with a smaller max_steps_off_policy makes stale groups.'),
  metric('batch_wait_s', 'Wait for samples', 'throughput',
    'Asynchronous RL: seconds the step waited for its batch to finish sampling.',
    'Near 0 when sampling keeps ahead; most of step_time_s when sampling is the bottleneck.'),
  metric('turns_mean', 'Turns per episode', 'policy',
    'Multi-turn environments: the policy\'s messages per episode.',
    'Between 1 and env.max_turns, moving the way the task needs.'),
  metric('frac_truncated', 'Episodes truncated', 'policy',
    'Multi-turn environments: fraction of episodes ended by a token or turn budget rather than by the policy or the environment.',
    'Near 0.',
    (v) => (last(v) > 0.5 ? 'above 0.5: most episodes hit a budget; raise max_turns, max_tokens or max_episode_tokens' : null)),
  metric('entropy', 'Entropy', 'policy',
    'Sampled per-token entropy of the policy (nats, at temperature 1).',
    'Falls slowly as the policy grows sure of its answers.',
    (v) => (v.length >= 3 && v[0] > 0 && last(v) < 0.2 * v[0]
      ? 'collapsed below a fifth of its start: completions become identical; lower the learning rate'
      : null)),
  metric('completion_len_mean', 'Completion length', 'policy',
    'Mean number of sampled tokens per completion.', 'Stable, or moving the way the task needs.',
    (v) => (v.length >= 3 && v[0] > 4 && last(v) <= 2
      ? 'collapsed to 1–2 tokens: the reward may be gamed; read the rollouts'
      : null)),
  metric('frac_terminated', 'Terminated', 'policy',
    'Fraction of completions that ended with the stop sequence rather than at max_tokens.',
    'Near 1.', (v) => (last(v) < 0.5 ? 'below 0.5: completions are cut off; raise max_tokens' : null)),
  metric('num_datums', 'Completions trained', 'batch',
    'Completions trained on: group_size × the groups kept.', 'Above 0.',
    (v) => (last(v) === 0 ? '0: every group was dropped this step' : null)),
  // DPO preferences
  metric('accuracy', 'Preference accuracy', 'accuracy',
    'Fraction of pairs where the chosen completion gained more log-ratio than the rejected one.',
    'About 0.5 at step 0, then rising; 0.6–0.8 held-out is good on human data.',
    (v) => (v.length >= 5 && last(v) < 0.45 ? 'below 0.5: are chosen and rejected swapped?' : null),
    'accuracy'),
  metric('eval_accuracy', 'Held-out accuracy', 'accuracy',
    'The same accuracy on the held-out pairs.', 'Rises with accuracy.',
    (v, all) => {
      const train = all.accuracy ?? []
      return v.length >= 3 && last(v) < Math.max(...v) - 0.1 && train.length > 2 && last(train) > 0.9
        ? 'falls while training accuracy is high: overfitting'
        : null
    },
    'accuracy'),
  metric('margin', 'Margin', 'preference',
    'Mean β·(c − r) = chosen_reward − rejected_reward.', '0 at step 0, then growing.',
    (v) => (v.length >= 5 && last(v) < 0 ? 'negative: the preference is being unlearned' : null),
    'margin'),
  metric('eval_margin', 'Held-out margin', 'preference',
    'The margin on the held-out pairs.', '0 at step 0, then growing.',
    (v) => (v.length >= 3 && last(v) < 0 ? 'negative on held-out pairs' : null), 'margin'),
  metric('chosen_reward', 'Chosen reward', 'preference',
    'Mean β·c: how much more (or less) likely the chosen completions became than under the reference.',
    '0 at step 0; both rewards usually fall, the rejected one faster.',
    (v) => (last(v) < -3
      ? 'falling steeply: good answers lose probability too; lower the learning rate or raise beta'
      : null),
    'rewards'),
  metric('rejected_reward', 'Rejected reward', 'preference',
    'Mean β·r for the rejected completions.', '0 at step 0, then falling faster than chosen_reward.',
    (v, all) => {
      const chosen = all.chosen_reward ?? []
      return v.length >= 3 && chosen.length > 0 && last(v) > last(chosen)
        ? 'above the chosen reward: the margin is negative'
        : null
    },
    'rewards'),
  metric('eval_chosen_reward', 'Held-out chosen reward', 'preference',
    'chosen_reward on the held-out pairs.', '0 at step 0; may fall slowly.',
    (v) => (last(v) < -3 ? 'falling steeply on held-out pairs' : null), 'eval_rewards'),
  metric('eval_rejected_reward', 'Held-out rejected reward', 'preference',
    'rejected_reward on the held-out pairs.', 'Falls faster than the held-out chosen reward.',
    (v, all) => {
      const chosen = all.eval_chosen_reward ?? []
      return v.length >= 3 && chosen.length > 0 && last(v) > last(chosen)
        ? 'above the held-out chosen reward'
        : null
    },
    'eval_rewards'),
  // Reward model held-out
  metric('rm_eval_accuracy', 'Judge accuracy', 'accuracy',
    'Fraction of held-out pairs where the judge gives P(chosen wins) > 0.5. Meaningless at step 0.',
    'Well above 0.5; above 0.7 on human data makes a useful judge.',
    (v) => (v.length >= 2 && last(v) < 0.6
      ? 'near 0.5: the judge has not learned the preference; RL against it learns noise'
      : null),
    'rm_accuracy'),
  metric('rm_eval_prob_chosen', 'Judge P(chosen)', 'accuracy',
    'Mean P(chosen beats rejected) on held-out pairs, over both orders.',
    '0.5 at step 0, then rising.', none, 'rm_accuracy'),
  metric('rm_eval_margin', 'Judge margin', 'preference',
    'Mean log-odds in favour of the chosen response, over both orders.',
    '0 at step 0, then growing.',
    (v) => (v.length >= 2 && last(v) < 0 ? 'negative: the judge prefers the rejected answers' : null)),
  metric('rm_eval_confidence', 'Judge confidence', 'accuracy',
    'Mean max(P, 1 - P) of the judge on held-out pairs: how sure it is. Compare with its accuracy.',
    'Close to rm_eval_accuracy: a calibrated judge right 70% of the time says about 0.7.',
    (v, all) => {
      const accuracy = all.rm_eval_accuracy ?? []
      return v.length >= 2 && accuracy.length > 0 && last(v) > last(accuracy) + 0.15
        ? 'well above its accuracy: the judge is overconfident'
        : null
    },
    'rm_accuracy'),
  metric('rm_eval_ece', 'Judge calibration error', 'accuracy',
    'Expected calibration error on held-out pairs: over five confidence bins, the gap between how sure the judge is and how often it is right, weighted by the pairs in each bin.',
    'Below 0.1.',
    (v) => (v.length >= 2 && last(v) > 0.2 ? 'above 0.2: its probabilities are not to be read as probabilities' : null)),
  // RLHF verdict
  metric('eval_win_rate_vs_sl', 'Win rate vs SL', 'accuracy',
    'Mean P(RL\'s answer beats SL\'s) on held-out prompts, according to the judge.',
    'Above 0.5; above 0.6 is a clear improvement.',
    (v) => (last(v) < 0.5 ? 'below 0.5: RL made the policy worse in the judge\'s eyes' : null)),
  metric('eval_judge_score_sl', 'Judge score (SL)', 'accuracy',
    'Mean P(SL policy\'s answer beats the reference).', 'Below the RL score.', none, 'judge_score'),
  metric('eval_judge_score_rl', 'Judge score (RL)', 'accuracy',
    'Mean P(RL policy\'s answer beats the reference); 0.5 = as good as the reference.',
    'Above the SL score.',
    (v, all) => {
      const sl = all.eval_judge_score_sl ?? []
      return sl.length > 0 && last(v) < last(sl) ? 'below the SL policy\'s score' : null
    },
    'judge_score'),
  // A Tinker SDK client's run (its forward_backward's own metrics, as the SDK returns them)
  metric('loss:sum', 'Loss (summed)', 'loss',
    'The loss function summed over the batch\'s tokens, as forward_backward returned it to the Tinker SDK client (a step\'s calls added up).',
    'Depends on the loss: cross-entropy falls (see Train NLL, its mean per trained token); an RL loss hovers around 0.'),
  // Batch answers (one row per shard done; counts over every input answered so far)
  metric('inputs_done', 'Inputs done', 'answers',
    'Inputs answered or failed so far, against inputs_total.', 'Rises to inputs_total.', none, 'inputs'),
  metric('inputs_total', 'Inputs in all', 'answers', 'The inputs of the dataset to answer.', 'Constant.', none, 'inputs'),
  metric('answered', 'Answered', 'answers', 'Inputs with an output.', 'Rises with inputs_done.', none, 'outcomes'),
  metric('failed', 'Failed', 'answers',
    'Inputs whose shard failed on every retry: an error instead of an output.', '0.',
    (v) => (last(v) > 0 ? 'inputs failed after every retry: read their errors in the Results' : null), 'outcomes'),
  metric('flagged', 'Flagged', 'answers',
    'Outputs whose confidence is below confidence_threshold: shown, never applied.', 'A small share of answered.', none, 'use'),
  metric('applied', 'Applied', 'answers',
    'Outputs to apply: not flagged and, for a fix, verified by its tests.', 'Most of answered.', none, 'use'),
  metric('verified', 'Verified', 'answers', 'Fixes whose tests passed (task fix).', 'Most of the fixes with tests.', none, 'verification'),
  metric('verification_failed', 'Tests failed', 'answers', 'Fixes whose tests failed (task fix).', 'Few.', none, 'verification'),
  metric('mean_confidence', 'Mean confidence', 'answers',
    'The mean over answered inputs of the share of samples that agree with the output.',
    'Near 1 on questions with one right answer; low means the model is unsure or the task is open.'),
  metric('shard_retries', 'Shard retries', 'answers',
    'Shards sent again to another actor after an error, a lost actor or shard_timeout_s.', '0, or a few.', none, 'pool'),
  metric('actors_lost', 'Actors lost', 'answers',
    'Actors that died or hung and were replaced.', '0.',
    (v) => (last(v) > 0 ? 'actors were lost: the Results\' pool says why' : null), 'pool'),
  // Evaluations (one row per model answered, the baseline first)
  metric('score_mean', 'Mean score', 'evaluation',
    'The model\'s mean score over the eval set, by the job\'s scorer (with scorer nll, minus its NLL of the references).',
    'Higher is better; whether a difference is real, the Evaluation panel\'s comparisons say.'),
  metric('nll_mean', 'Mean NLL of the references', 'evaluation',
    'The model\'s mean negative log-likelihood per token of the eval set\'s reference answers (nats).',
    'Lower is better: the model finds the references more likely.'),
  // Reviews (one row per checkpoint of the committee, the reviewed one last)
  metric('review_accuracy', 'Agreement with the labels', 'review',
    'The share of the dataset\'s pairs where the checkpoint gives the dataset\'s chosen answer P > 0.5.',
    'Well above 0.5; on pairs the reward model trained on, near its training accuracy.',
    (v) => (last(v) < 0.5 ? 'below 0.5: the checkpoint prefers the rejected answers more often than not' : null)),
  // Shared
  metric('learning_rate', 'Learning rate', 'optimizer',
    'Learning rate of the step, after warmup and the schedule.',
    'Follows the schedule; LoRA on real models: about 1e-5 to 5e-4.',
    (v) => (last(v) > 0.01 ? 'above 1e-2: very high; fine only for a tiny random model' : null)),
  metric('grad_norm', 'Gradient norm', 'optimizer',
    'Global L2 norm of the adapter\'s gradient before clipping.',
    'Steady or slowly falling, judged against its own level.',
    spike(10, 3, 'spiked 10× above its recent level: lower the learning rate or add warmup')),
  metric('grad_clipped', 'Clipped', 'optimizer',
    'Whether grad_clip_norm scaled the step\'s gradient down: 1 or 0 (RL: the share of its substeps). Its mean over steps is the clip rate.',
    'Mostly 0: a clip now and then catches a spike.',
    (v) => {
      const recent = v.slice(-10)
      return recent.length >= 5 && recent.reduce((a, b) => a + b, 0) / recent.length > 0.5
        ? 'most recent steps were clipped: the cap, not the learning rate, sets the step size; lower the learning rate or raise grad_clip_norm'
        : null
    }),
  metric('param_norm', 'Adapter weight norm', 'optimizer',
    'L2 norm of the adapter\'s weights after the optimizer step.',
    'Grows slowly and steadily as the adapter moves away from zero.',
    spike(10, 3, 'jumped 10× above its recent level: divergence may follow; lower the learning rate')),
  metric('num_tokens', 'Trained tokens', 'batch',
    'Trained tokens in the batch (the sum of the weights).', 'Roughly constant, above 0.',
    (v) => (last(v) <= 0 ? '0: nothing is trained; check train_on_what and max_length' : null)),
  metric('num_sequences', 'Examples', 'batch', 'Examples in the batch.', 'Equal to batch_size.'),
  metric('num_pairs', 'Pairs', 'batch', 'Preference pairs in the batch.', 'Equal to batch_size.'),
  metric('step_time_s', 'Seconds per step', 'throughput',
    'Wall time of the step; evaluation steps take about twice as long.', 'Steady.',
    sustained('slower', 'twice as slow as earlier in the run: the machine may be shared or short of memory')),
  metric('sample_tokens_per_s', 'Sampled tokens/s', 'throughput',
    'Sampled completion tokens per second of sampling time.', 'Steady; compare across runs.',
    sustained('faster', 'half the speed of earlier in the run: the machine may be shared')),
  metric('train_tokens_per_s', 'Trained tokens/s', 'throughput',
    'Derived here: trained tokens ÷ seconds per step.', 'Steady; compare across runs.',
    sustained('faster', 'half the speed of earlier in the run: the machine may be shared')),
]

export const METRICS: Readonly<Record<string, MetricInfo>> = Object.fromEntries(
  DEFINITIONS.map((m) => [m.key, m]),
)

const ORDER = new Map(DEFINITIONS.map((m, i) => [m.key, i]))

/** The registry's order (training metric before its held-out twin), for stable charts. */
export function metricOrder(key: string): number {
  return ORDER.get(key) ?? DEFINITIONS.length
}

/** Chart titles for charts that hold several metrics. */
export const CHART_TITLES: Readonly<Record<string, string>> = {
  nll: 'Loss (NLL)',
  inputs: 'Inputs done',
  outcomes: 'Answered and failed',
  use: 'Applied and flagged',
  verification: 'Fix tests',
  pool: 'Retries and lost actors',
  dpo_loss: 'DPO loss',
  rm_nll: 'Judge NLL',
  reward: 'Reward',
  accuracy: 'Preference accuracy',
  margin: 'Margin',
  rewards: 'Chosen vs rejected reward',
  eval_rewards: 'Held-out chosen vs rejected reward',
  rm_accuracy: 'Judge accuracy',
  judge_score: 'Judge score vs reference',
}

/** Row keys that are not metrics. */
const NOT_METRICS = new Set(['step', 'time', 'stage'])

/** The description of any key, with a neutral fallback for keys added after this file. */
export function metricInfo(key: string): MetricInfo {
  return (
    METRICS[key] ??
    metric(key, key, 'other', 'Logged by the algorithm; no description in this version yet.', '—')
  )
}

export function isMetricKey(key: string): boolean {
  return !NOT_METRICS.has(key)
}

/** The warning for one metric's latest value, or null when it is in its healthy range. */
export function checkMetric(key: string, values: readonly number[], all: SeriesMap = {}): string | null {
  return metricInfo(key).check(values, all)
}

/** The metric that best stands for "loss" in a job list sparkline, for any algorithm. */
export function primaryMetric(keys: Iterable<string>): string | null {
  const have = new Set(keys)
  const order = ['train_mean_nll', 'dpo_loss', 'rm_train_nll', 'reward_mean', 'loss:sum', 'mean_confidence', 'score_mean', 'review_accuracy']
  return order.find((k) => have.has(k)) ?? null
}

/** A compact number for labels: 3 significant digits, scientific for tiny values. */
export function formatValue(v: number | null | undefined): string {
  if (v === null || v === undefined) return '—'
  if (!Number.isFinite(v)) return String(v)
  if (v === 0) return '0'
  const a = Math.abs(v)
  if (a < 1e-3 || a >= 1e6) return v.toExponential(2)
  if (Number.isInteger(v)) return v.toLocaleString('en-US')
  return Number(v.toPrecision(3)).toString()
}
