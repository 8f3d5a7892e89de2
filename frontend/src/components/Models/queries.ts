// Server state for the model library. Lifecycle changes patch the cache at once so the
// table does not flicker back while the list refetches. The leaderboard of an eval set lives
// under ['models'] too: a job's state event (an eval job finishing) refreshes it.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, errorMessage, unwrap, type Schemas } from '../../api/client'

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
