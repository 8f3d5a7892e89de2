// The four algorithms as users meet them: what they are, when to pick them, their data, their
// loss, the dataset kinds the server accepts for them (jobs/spec.py KINDS), and the key
// hyperparameters the forms show (their values and rules come from the server).
import type { Schemas } from '../../api/client'

export type Algorithm = Schemas['JobCreate']['algorithm']
export type DatasetKind = Schemas['DatasetPublic']['kind']

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
]

export const ALGORITHM_BY_ID = Object.fromEntries(ALGORITHMS.map((a) => [a.id, a])) as Record<
  Algorithm,
  AlgorithmInfo
>

/** The dataset kinds each algorithm trains on; RLHF's three datasets by stage. */
export const KINDS: Record<Algorithm, DatasetKind[]> = {
  sl: ['chat', 'prompt_completion'],
  dpo: ['preferences'],
  rl: ['problems'],
  rlhf: ['chat', 'prompt_completion'],
}
export const RLHF_KINDS = {
  sl: ['chat', 'prompt_completion'] as DatasetKind[],
  rm: ['preferences'] as DatasetKind[],
  rl: ['problems'] as DatasetKind[],
}

export interface ParamSpec {
  key: string
  label: string
  type: 'number' | 'select'
  options?: string[]
  help: string
}

const LR = (help: string): ParamSpec => ({ key: 'learning_rate', label: 'Learning rate', type: 'number', help })
const RANK: ParamSpec = {
  key: 'lora_rank', label: 'LoRA rank', type: 'number',
  help: 'Adapter capacity; 32 suits most datasets.',
}
const SCHEDULE: ParamSpec = {
  key: 'lr_schedule', label: 'LR schedule', type: 'select',
  options: ['linear', 'cosine', 'constant'], help: 'How the learning rate changes over the run.',
}
const EVERY = (key: 'eval_every' | 'save_every'): ParamSpec => ({
  key, label: key === 'eval_every' ? 'Eval every' : 'Save every', type: 'number',
  help: key === 'eval_every'
    ? 'Steps between held-out evaluations (0 = only at the end).'
    : 'Steps between checkpoints; each becomes a model (0 = only at the end).',
})

export const PARAMS: Record<Algorithm, ParamSpec[]> = {
  sl: [
    LR('LoRA wants ~10× the full fine-tuning rate; halve it if the loss swings.'),
    { key: 'batch_size', label: 'Batch size', type: 'number', help: 'Examples per step.' },
    { key: 'micro_batch_size', label: 'Micro-batch', type: 'number', help: 'Examples per forward/backward pass; unset, as many as fit in free GPU memory (the job log explains the choice).' },
    { key: 'num_epochs', label: 'Epochs', type: 'number', help: 'Passes over the data (ignored when max steps is set).' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'Steps to train; when set, epochs are ignored.' },
    RANK,
    SCHEDULE,
    { key: 'max_length', label: 'Max length', type: 'number', help: 'Tokens per example; longer ones are cut at the end.' },
    EVERY('eval_every'),
    EVERY('save_every'),
  ],
  dpo: [
    LR('The cookbook DPO default; too high erases what the model knew.'),
    { key: 'beta', label: 'Beta', type: 'number', help: 'Pull towards the reference: higher stays closer.' },
    { key: 'batch_size', label: 'Batch size', type: 'number', help: 'Pairs per step.' },
    { key: 'micro_batch_size', label: 'Micro-batch', type: 'number', help: 'Pairs per pass; unset, as many as fit in free GPU memory.' },
    { key: 'num_epochs', label: 'Epochs', type: 'number', help: 'Passes over the pairs.' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'Steps to train; when set, epochs are ignored.' },
    RANK,
    EVERY('eval_every'),
    EVERY('save_every'),
  ],
  rl: [
    LR('Real models: 1e-5 – 4e-5.'),
    { key: 'group_size', label: 'Group size', type: 'number', help: 'Completions sampled per prompt.' },
    { key: 'groups_per_batch', label: 'Groups per batch', type: 'number', help: 'Prompts per step.' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'RL steps.' },
    { key: 'max_tokens', label: 'Max tokens', type: 'number', help: 'Per completion; above the longest good answer.' },
    { key: 'temperature', label: 'Temperature', type: 'number', help: 'Must leave room to explore.' },
    { key: 'loss_fn', label: 'Loss', type: 'select', options: ['importance_sampling', 'ppo', 'cispo', 'dro'], help: 'Policy-gradient loss.' },
    { key: 'kl_coef', label: 'KL coefficient', type: 'number', help: 'Penalty on drifting from the base model (0 = off).' },
    RANK,
    EVERY('eval_every'),
    EVERY('save_every'),
  ],
  rlhf: [RANK],
}

/** Stage settings the RLHF form exposes; the rest go in the JSON editor. */
export const RLHF_STAGE_PARAMS: Record<'sl' | 'rm' | 'rl', ParamSpec[]> = {
  sl: [
    LR('SL stage learning rate.'),
    { key: 'batch_size', label: 'Batch size', type: 'number', help: 'Demonstrations per step.' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'Steps of this stage.' },
  ],
  rm: [
    LR('Judge learning rate (cookbook: 3e-4).'),
    { key: 'batch_size', label: 'Batch size', type: 'number', help: 'Pairs per step (each in both orders).' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'Steps of this stage.' },
  ],
  rl: [
    LR('RL stage learning rate (cookbook RLHF: 1e-5).'),
    { key: 'group_size', label: 'Group size', type: 'number', help: 'Judge calls grow as n²: the cookbook uses 4.' },
    { key: 'groups_per_batch', label: 'Groups per batch', type: 'number', help: 'Prompts per step.' },
    { key: 'max_steps', label: 'Max steps', type: 'number', help: 'RL steps.' },
  ],
}
