// Server state for the model library. Lifecycle changes patch the cache at once so the
// table does not flicker back while the list refetches. The leaderboard of an eval set lives
// under ['models'] too: a job's state event (an eval job finishing) refreshes it. Deployments
// are polled (the server's loop moves their cycles on, with no event): fast while a cycle is in
// flight, slowly otherwise, for the notice badge. A reward model's reviews live under ['jobs']:
// a job's state event (a review finishing) refetches them and its queue.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, errorMessage, unwrap, type Schemas } from '../../api/client'
import { isLive } from '../../api/vocabulary'
import type { Deployment, DeploymentCreate, DeploymentSettings } from './deployments'
import { withAnswer, type Choice, type Review } from './review'

export type Model = Schemas['ModelPublic']
export type ModelDetail = Schemas['ModelDetail']
export type Lifecycle = Model['lifecycle']
export type ModelFilter = { lifecycle?: Lifecycle; base_model?: string; dataset_id?: string; job_id?: string }

export const LIFECYCLES: Lifecycle[] = ['active', 'deprecated', 'archived']

export function useModels(filter: ModelFilter, enabled = true) {
  return useQuery({
    queryKey: ['models', filter],
    enabled,
    queryFn: async () => unwrap(await api.GET('/api/models', { params: { query: { ...filter, limit: 1000 } } })),
  })
}

export function useModel(id: string) {
  return useQuery({
    queryKey: ['model', id],
    queryFn: async () => unwrap(await api.GET('/api/models/{model_id}', { params: { path: { model_id: id } } })),
  })
}

export function useUpdateModel() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async ({ id, body }: { id: string; body: Schemas['ModelUpdate'] }) =>
      unwrap(await api.PATCH('/api/models/{model_id}', { params: { path: { model_id: id } }, body })),
    onSuccess: (model) => {
      client.setQueryData(['model', model.id], model)
      client.invalidateQueries({ queryKey: ['models'] })
    },
  })
}

/** The finished eval jobs, newest first: the eval sets a leaderboard can be had for. */
export function useEvalJobs() {
  return useQuery({
    queryKey: ['jobs', 'list', 'eval', 'succeeded'],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs', { params: { query: { algorithm: 'eval', state: 'succeeded', limit: 200 } } })),
  })
}

/** The leaderboard of an eval set, or the server's reason there is none (its 404: no finished
 * eval job on it, or none with that scorer). */
export interface LeaderboardAnswer {
  board: Schemas['LeaderboardPublic'] | null
  missing: string | null
}

export function useLeaderboard(datasetId: string, scorer: string) {
  return useQuery({
    queryKey: ['models', 'leaderboard', datasetId, scorer],
    enabled: !!datasetId,
    queryFn: async (): Promise<LeaderboardAnswer> => {
      const result = await api.GET('/api/models/leaderboard', {
        params: { query: { dataset_id: datasetId, ...(scorer ? { scorer } : {}) } },
      })
      if (result.response.status === 404) return { board: null, missing: errorMessage(result.error) }
      return { board: unwrap(result), missing: null }
    },
  })
}

/** The library answers `count` for all matches: the dataset names come from the datasets list. */
export function useDatasetNames(): Map<string, string> {
  const datasets = useQuery({
    queryKey: ['datasets'],
    queryFn: async () => unwrap(await api.GET('/api/datasets', { params: { query: { limit: 1000 } } })),
  })
  return new Map((datasets.data?.data ?? []).map((d) => [d.id, `${d.name} v${d.version}`]))
}

/** A reward model's review jobs, newest first; polled while one runs. */
export function useReviewJobs(modelId: string) {
  return useQuery({
    queryKey: ['jobs', 'list', 'review', modelId],
    queryFn: async () =>
      unwrap(await api.GET('/api/jobs', { params: { query: { algorithm: 'review', parent_model_id: modelId, limit: 200 } } })),
    refetchInterval: (q) => (q.state.data?.data.some((j) => isLive(j.state)) ? 3_000 : false),
  })
}

/** A review job's summary (null until it finished) and its queue with the answers so far;
 * polled while the job runs. */
export function useJobReview(jobId: string, live: boolean) {
  return useQuery({
    queryKey: ['jobs', jobId, 'review'],
    queryFn: async () => unwrap(await api.GET('/api/jobs/{job_id}/review', { params: { path: { job_id: jobId } } })),
    refetchInterval: live ? 5_000 : false,
  })
}

/** Answer (or change the answer to) one pair of a review's queue: the pair comes back with its
 * label and the model's probabilities, and takes its place in the cached queue. */
export function useAnswerReview(jobId: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async ({ pair, choice }: { pair: number; choice: Choice }) =>
      unwrap(await api.PUT('/api/jobs/{job_id}/review/{pair}', { params: { path: { job_id: jobId, pair } }, body: { choice } })),
    onSuccess: (item) => client.setQueryData<Review>(['jobs', jobId, 'review'], (review) => (review ? withAnswer(review, item) : review)),
  })
}

/** A new version of the reviewed dataset with a review's answers in it (the server's 409 when
 * no answer changes it: its detail is the error's message). */
export function useReviewDataset(jobId: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async (name: string) =>
      unwrap(await api.POST('/api/jobs/{job_id}/review/dataset', { params: { path: { job_id: jobId } }, body: name.trim() ? { name: name.trim() } : {} })),
    onSuccess: () => client.invalidateQueries({ queryKey: ['datasets'] }),
  })
}

/** A cycle in flight moves on by the server's loop: poll it closely. */
export const CYCLE_POLL_MS = 3_000
/** Otherwise: a scheduled cycle may start (and end) any time; the badge hears of it this late. */
export const IDLE_POLL_MS = 30_000

const inFlight = (d: Deployment | undefined) => !!d?.cycle

export function useDeployments() {
  return useQuery({
    queryKey: ['deployments'],
    queryFn: async () => unwrap(await api.GET('/api/deployments')),
    refetchInterval: (q) => (q.state.data?.some(inFlight) ? CYCLE_POLL_MS : IDLE_POLL_MS),
  })
}

export function useDeployment(name: string) {
  return useQuery({
    queryKey: ['deployments', name],
    queryFn: async () => unwrap(await api.GET('/api/deployments/{name}', { params: { path: { name } } })),
    refetchInterval: (q) => (inFlight(q.state.data) ? CYCLE_POLL_MS : IDLE_POLL_MS),
  })
}

/** A deployment as an action answered it: cached at once, the list refetched. */
function useSaveDeployment() {
  const client = useQueryClient()
  return (d: Deployment) => {
    client.setQueryData(['deployments', d.name], d)
    void client.invalidateQueries({ queryKey: ['deployments'], exact: true })
  }
}

export function useCreateDeployment() {
  const save = useSaveDeployment()
  return useMutation({
    mutationFn: async (body: DeploymentCreate) => unwrap(await api.POST('/api/deployments', { body })),
    onSuccess: save,
  })
}

export function useUpdateDeployment(name: string) {
  const save = useSaveDeployment()
  return useMutation({
    // Only the settings given change; the generated type calls every one required.
    mutationFn: async (body: Partial<DeploymentSettings>) =>
      unwrap(await api.PATCH('/api/deployments/{name}', { params: { path: { name } }, body: body as DeploymentSettings })),
    onSuccess: save,
  })
}

/** Run a cycle now, or put a model through the promotion gate. */
export function useDeploymentAction(name: string) {
  const save = useSaveDeployment()
  const client = useQueryClient()
  return useMutation({
    mutationFn: async (action: { type: 'cycle' } | { type: 'promote'; modelId: string }) => {
      const path = { params: { path: { name } } }
      return unwrap(
        action.type === 'cycle'
          ? await api.POST('/api/deployments/{name}/cycle', path)
          : await api.POST('/api/deployments/{name}/promote', { ...path, body: { model_id: action.modelId } }),
      )
    },
    onSuccess: (d) => {
      save(d)
      // A cycle makes a dataset version and jobs.
      void client.invalidateQueries({ queryKey: ['jobs'] })
    },
  })
}

export function useDeleteDeployment(name: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: async () => {
      const { error, response } = await api.DELETE('/api/deployments/{name}', { params: { path: { name } } })
      if (!response.ok) throw new Error(errorMessage(error ?? `HTTP ${response.status}`))
    },
    onSuccess: () => {
      client.removeQueries({ queryKey: ['deployments', name] })
      void client.invalidateQueries({ queryKey: ['deployments'], exact: true })
    },
  })
}
