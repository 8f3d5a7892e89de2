// The algorithms as users meet them (four that train a policy and one a reward model on its
// own; batch answers, evaluations and reviews, which train nothing): what they are, when to pick
// them, their data, their loss, and which settings the forms show. Everything else about a setting
// (its help, default or proposal, choices, bounds) and the dataset kinds each algorithm takes
// come from the server's OpenAPI document (api/jobConfig.ts).
import { trains, type Algorithm, type RlhfStage, type TrainingAlgorithm } from '../../api/jobConfig'

export type { Algorithm, TrainingAlgorithm } from '../../api/jobConfig'

export interface AlgorithmInfo {
  id: Algorithm
  name: string
  short: string
  what: string
  when: string
  example: string
  loss: string
  /** The goal as the wizard phrases it. */
  goal: string
}

export const ALGORITHMS: AlgorithmInfo[] = [
  {
    id: 'sl',
    name: 'Supervised learning',
    short: 'SL',
    goal: 'Teach a format or the right answers',
    what: 'Learns from examples of the right output: each example raises the probability of its answer, token by token.',
    when: 'You can write (or generate) good outputs for your prompts. Also the cheap first stage before RL or DPO.',
    example: '{"messages": [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]}',
    loss: 'Cross-entropy (negative log-likelihood) of the trained tokens.',
  },
  {
    id: 'dpo',
    name: 'Direct preference optimization',
    short: 'DPO',
    goal: 'Prefer one answer over another',
    what: 'Learns from pairs "chosen is better than rejected", against a frozen copy of the starting weights — no reward model, no sampling.',
    when: 'You have preference pairs and want one simple run. Works best on a model that already answers in the right format.',
    example: '{"prompt": "3+4", "chosen": "7", "rejected": "maybe 8?"}',
    loss: '−log σ(β·(chosen log-ratio − rejected log-ratio)), the Bradley–Terry preference loss.',
  },
  {
    id: 'rl',
    name: 'Reinforcement learning',
    short: 'RL',
    goal: 'Reward a checkable outcome',
    what: 'Samples several completions per prompt, scores them with a reward (a reference answer, unit tests, a pattern, your function) and reinforces the better ones.',
    when: 'A program can check an answer but you have no perfect demonstrations. Warm-start with SL if the model almost never scores.',
    example: '{"prompt": "What is 3+4?", "answer": "7"}',
    loss: 'Policy gradient (importance sampling / PPO) on advantage = reward − group mean.',
  },
  {
    id: 'rlhf',
    name: 'RL from human feedback',
    short: 'RLHF',
    goal: 'Learn a judge, then RL against it',
    what: 'Three runs: SL on demonstrations, a reward model (a judge) trained on preference pairs, then RL from the SL weights with the judge as reward.',
    when: 'Humans can judge answers but no program can, and you want the policy to keep improving on prompts nobody labelled.',
    example: 'demonstrations (chat) + pairs {"prompt", "chosen", "rejected"} + prompts {"prompt", "reference"}',
    loss: 'Cross-entropy (SL and judge), then policy gradient with the judge\'s win probability as reward.',
  },
  {
    id: 'rm',
    name: 'Reward model',
    short: 'RM',
    goal: 'Train a judge of which answer is better',
    what: 'Trains a reward model on preference pairs: a pairwise judge that says which of two answers is better (or, with head bradley_terry, a score per answer). Every checkpoint is a reward model in the library. From a library reward model (mdl_…) it retrains that one.',
    when: 'You want a judge of your own, to score RL or an eval job, or to retrain one on the answers of a review. RLHF trains one as its second stage.',
    example: '{"prompt": "3+4", "chosen": "7", "rejected": "maybe 8?"}',
    loss: 'Cross-entropy of the judge\'s verdict, each pair in both orders (bradley_terry: −log σ(r_chosen − r_rejected)).',
  },
  {
    id: 'batch',
    name: 'Batch answers',
    short: 'Batch',
    goal: 'Answer many inputs, with confidences',
    what: 'A model answers every row of a dataset over a pool of worker processes; each input is sampled several times, and the share of samples that agree is the answer\'s confidence. Low-confidence answers are flagged; a fix can be checked against the row\'s tests.',
    when: 'You want a model\'s answers (or reviews, or fixes) for a whole dataset, and to know which ones to trust. Nothing is trained and no model is made.',
    example: '{"prompt": "What is 3+4?"}  →  {"index": 0, "output": "7", "confidence": 1.0, "flagged": false}',
    loss: 'None: nothing is trained.',
  },
  {
    id: 'eval',
    name: 'Evaluate (A/B)',
    short: 'Eval',
    goal: 'Find out which model is better',
    what: 'A baseline and one or more models answer the same eval set; each answer is scored, and every pair of models is compared prompt by prompt: the win rate with its bootstrap 95% interval, and whether the difference is significant by a sign test.',
    when: 'You trained a model (or several) and want to know whether it really beats its base model or another one, and how sure that is. Nothing is trained and no model is made.',
    example: '{"prompt": "3+4", "answer": "7"}  →  "sl@100 is better: 96% win rate [93%, 99%], p < 0.0001, n = 100"',
    loss: 'None: nothing is trained.',
  },
  {
    id: 'review',
    name: 'Reward model review',
    short: 'Review',
    goal: 'Ask a person about the pairs a reward model is least sure of',
    what: 'The last checkpoints of a reward model (a committee) score every pair of a preferences dataset; the pairs they are least sure of, or disagree on, make a queue that a person answers blind. The answers make a new version of the dataset to retrain the reward model on.',
    when: 'You trained a reward model and want to know where it is unsure, how well calibrated it is, and to fix the labels it trips on. Started from a reward model\'s page; nothing is trained and no model is made.',
    example: '{"prompt", "chosen", "rejected"}  →  "pair 12: A or B? (0.99 bits uncertain)"',
    loss: 'None: nothing is trained.',
  },
]

/** The algorithms that train a model, in the order above: the wizard's and the guides' choices. */
export const TRAINING_ALGORITHMS: TrainingAlgorithm[] = ALGORITHMS.map((a) => a.id).filter(trains)

export const ALGORITHM_BY_ID = Object.fromEntries(ALGORITHMS.map((a) => [a.id, a])) as Record<
  Algorithm,
  AlgorithmInfo
>

/** A setting a form shows: its key in the algorithm's config, and its label. */
export interface ParamSpec {
  key: string
  label: string
}

const LABELS: Record<string, string> = {
  learning_rate: 'Learning rate',
  batch_size: 'Batch size',
  micro_batch_size: 'Micro-batch',
  num_epochs: 'Epochs',
  max_steps: 'Max steps',
  lora_rank: 'LoRA rank',
  lr_schedule: 'LR schedule',
  max_length: 'Max length',
  eval_every: 'Eval every',
  save_every: 'Save every',
  beta: 'Beta',
  group_size: 'Group size',
  groups_per_batch: 'Groups per batch',
  max_tokens: 'Max tokens',
  temperature: 'Temperature',
  loss_fn: 'Loss',
  head: 'Reward model head',
  kl_coef: 'KL coefficient',
  variant: 'Variant',
  max_steps_off_policy: 'Steps off-policy',
  task: 'Task',
  samples: 'Samples per input',
  confidence_threshold: 'Confidence threshold',
  workers: 'Workers (actors)',
  shard_size: 'Shard size',
  system_prompt: 'System prompt',
  max_examples: 'Max examples',
  alpha: 'Significance level (α)',
  committee: 'Committee (checkpoints)',
  queue_size: 'Queue size',
  max_pairs: 'Max pairs',
}

const specs = (...keys: string[]): ParamSpec[] => keys.map((key) => ({ key, label: LABELS[key] ?? key }))

/** The settings the new-job form shows, by algorithm; the rest go in its JSON editor. */
export const PARAMS: Record<Algorithm, ParamSpec[]> = {
  sl: specs('learning_rate', 'batch_size', 'micro_batch_size', 'num_epochs', 'max_steps', 'lora_rank', 'lr_schedule', 'max_length', 'eval_every', 'save_every'),
  dpo: specs('learning_rate', 'beta', 'batch_size', 'micro_batch_size', 'num_epochs', 'max_steps', 'lora_rank', 'eval_every', 'save_every'),
  rl: specs('learning_rate', 'group_size', 'groups_per_batch', 'max_steps', 'max_tokens', 'variant', 'loss_fn', 'kl_coef', 'max_steps_off_policy', 'lora_rank', 'eval_every', 'save_every'),
  rlhf: specs('lora_rank'),
  rm: specs('head', 'learning_rate', 'batch_size', 'max_steps', 'eval_every', 'save_every'),
  batch: specs('task', 'samples', 'temperature', 'max_tokens', 'confidence_threshold', 'workers', 'shard_size', 'system_prompt'),
  // the models and the scorer have fields of their own (EvalFields.tsx)
  eval: [...specs('max_tokens'), { key: 'samples', label: 'Samples per prompt' }, ...specs('temperature', 'max_examples', 'alpha')],
  // started from a reward model's page (Models/ReviewSection.tsx), not the new-job form
  review: specs('committee', 'queue_size', 'max_pairs'),
}

/** The algorithms the new-job form offers: all but review, which starts from a reward model's
 * page. */
export const FORM_ALGORITHMS: AlgorithmInfo[] = ALGORITHMS.filter((a) => a.id !== 'review')

/** The settings of each RLHF stage the form shows. */
export const RLHF_STAGE_PARAMS: Record<RlhfStage, ParamSpec[]> = {
  sl: specs('learning_rate', 'batch_size', 'max_steps'),
  rm: specs('head', 'learning_rate', 'batch_size', 'max_steps'),
  rl: specs('learning_rate', 'group_size', 'groups_per_batch', 'max_steps'),
}

/** The settings the wizard shows for each stage it proposes: a supervised one (sl, dpo, rm)
 * or an RL one. */
export const WIZARD_PARAMS: Record<'supervised' | 'rl', ParamSpec[]> = {
  supervised: [
    ...specs('batch_size'),
    { key: 'max_steps', label: 'Steps' },
    ...specs('num_epochs', 'learning_rate'),
    { key: 'eval_every', label: 'Evaluate every' },
    ...specs('save_every'),
  ],
  rl: [
    ...specs('group_size'),
    { key: 'groups_per_batch', label: 'Prompts per step' },
    { key: 'max_steps', label: 'Steps' },
    ...specs('learning_rate'),
    { key: 'eval_every', label: 'Evaluate every' },
    ...specs('save_every'),
  ],
}
