// The models a user can sample: /v1/models lists what the server will serve (built-ins and
// every trained model not archived); /api/models adds the names and lineage to label them.
import { useQuery } from '@tanstack/react-query'
import { api, unwrap, type Schemas } from '../../api/client'

export interface ModelOption {
  id: string
  /** What the picker shows: the name, then base model + step as the lineage. */
  label: string
  builtin: boolean
  model?: Schemas['ModelPublic']
}

interface OpenAiModel {
  id: string
  parent: string | null
}

function isOpenAiModel(value: unknown): value is OpenAiModel {
  return typeof value === 'object' && value !== null && typeof (value as OpenAiModel).id === 'string'
}

export function lineageLabel(model: Schemas['ModelPublic']): string {
  const stage = model.stage ? ` ${model.stage}` : ''
  return `${model.name} · ${model.base_model} +${stage} step ${model.step}`
}

export function buildOptions(served: OpenAiModel[], library: Schemas['ModelPublic'][]): ModelOption[] {
  const byId = new Map(library.map((m) => [m.id, m]))
  return served.map((entry) => {
    const model = byId.get(entry.id)
    if (model) return { id: entry.id, label: lineageLabel(model), builtin: false, model }
    return { id: entry.id, label: entry.parent ? `${entry.id} · ${entry.parent}` : entry.id, builtin: !entry.parent }
  })
}

export function useModelOptions() {
  return useQuery({
    queryKey: ['playground-models'],
    queryFn: async (): Promise<ModelOption[]> => {
      const [served, library] = await Promise.all([
        api.GET('/v1/models').then(unwrap),
        api.GET('/api/models', { params: { query: { limit: 1000 } } }).then(unwrap),
      ])
      const data = Array.isArray(served.data) ? served.data.filter(isOpenAiModel) : []
      return buildOptions(data, library.data)
    },
  })
}
