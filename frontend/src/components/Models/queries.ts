// Server state for the model library. Lifecycle changes patch the cache at once so the
// table does not flicker back while the list refetches.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap, type Schemas } from '../../api/client'

export type Model = Schemas['ModelPublic']
export type ModelDetail = Schemas['ModelDetail']
export type Lifecycle = Model['lifecycle']
export type ModelFilter = { lifecycle?: Lifecycle; base_model?: string; dataset_id?: string; job_id?: string }

export const LIFECYCLES: Lifecycle[] = ['active', 'deprecated', 'archived']

export function useModels(filter: ModelFilter) {
  return useQuery({
    queryKey: ['models', filter],
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

/** The library answers `count` for all matches: the dataset names come from the datasets list. */
export function useDatasetNames(): Map<string, string> {
  const datasets = useQuery({
    queryKey: ['datasets'],
    queryFn: async () => unwrap(await api.GET('/api/datasets', { params: { query: { limit: 1000 } } })),
  })
  return new Map((datasets.data?.data ?? []).map((d) => [d.id, `${d.name} v${d.version}`]))
}
