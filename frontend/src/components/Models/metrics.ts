// Which of a model's metrics say most about it, in order of preference: held-out figures
// before training ones, because those are what a comparison should rest on.
import { formatNumber } from '../Datasets/format'

const KEY_METRICS = [
  'eval_mean_nll',
  'eval_reward_mean',
  'eval_accuracy',
  'train_mean_nll',
  'reward_mean',
  'accuracy',
  'loss',
]

export function keyMetrics(metrics: Record<string, unknown>, max = 3): [string, number][] {
  return KEY_METRICS.filter((k) => typeof metrics[k] === 'number')
    .slice(0, max)
    .map((k) => [k, metrics[k] as number])
}

export function metricValue(value: unknown): string {
  return typeof value === 'number' ? formatNumber(value) : JSON.stringify(value)
}
