// Server state for the dataset screens: one query key per resource, so a mutation can
// invalidate exactly what it changed.
import { useQuery } from '@tanstack/react-query'
import { api, unwrap, type Schemas } from '../../api/client'

export type Dataset = Schemas['DatasetPublic']
export type DatasetDetail = Schemas['DatasetDetail']
export type TrainOnWhat = Schemas['TrainOnWhat']

/** The rendering options of preview and stats; undefined fields take the server's default. */
export interface RenderOptions {
  base_model?: string
  renderer?: string
  train_on_what?: TrainOnWhat
  max_length?: number
}

export function useDatasets() {
  return useQuery({
    queryKey: ['datasets'],
    queryFn: async () => unwrap(await api.GET('/api/datasets', { params: { query: { limit: 1000 } } })),
  })
}

export function useDataset(id: string) {
  return useQuery({
    queryKey: ['dataset', id],
    queryFn: async () =>
      unwrap(await api.GET('/api/datasets/{dataset_id}', { params: { path: { dataset_id: id } } })),
  })
}

export function usePreview(id: string, options: RenderOptions, offset: number, limit: number) {
  return useQuery({
    queryKey: ['dataset-preview', id, options, offset, limit],
    queryFn: async () =>
      unwrap(
        await api.GET('/api/datasets/{dataset_id}/preview', {
          params: { path: { dataset_id: id }, query: { ...options, offset, limit } },
        }),
      ),
    retry: false,
  })
}

export function useStats(id: string, options: RenderOptions) {
  return useQuery({
    queryKey: ['dataset-stats', id, options],
    queryFn: async () =>
      unwrap(
        await api.GET('/api/datasets/{dataset_id}/stats', {
          params: { path: { dataset_id: id }, query: options },
        }),
      ),
    retry: false,
    // Stats of a stored dataset never change for the same options.
    staleTime: Infinity,
  })
}
