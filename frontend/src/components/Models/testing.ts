// Test fixtures of deployments: one as GET /api/deployments/{name} answers, and a history entry.
import type { Deployment, DeploymentEvent } from './deployments'

export const deployment = (extra: Partial<Deployment> = {}): Deployment => ({
  name: 'assistant',
  model_id: 'mdl_a',
  log_traffic: true,
  redact: 'pii',
  retention_days: 30,
  schedule: '0 3 * * *',
  min_feedback: 10,
  learn_steps: 30,
  eval_dataset_id: 'ds_test',
  feedback_dataset_id: null,
  cycle: null,
  history: [],
  next_cycle_at: 1_800_000_000,
  traffic: 20,
  feedback: 12,
  feedback_new: 4,
  ...extra,
})

export const ev = (at: number, event: DeploymentEvent['event'], detail: string, extra: Partial<DeploymentEvent> = {}): DeploymentEvent => ({
  at,
  event,
  detail,
  ...extra,
})
