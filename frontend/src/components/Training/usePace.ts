// How long a step takes, for the wizard's estimate: measured from the newest finished job on
// this server with the same algorithm, base model and backend; else the guide's figure for
// thinker/tiny; else unknown.
import { useQuery } from '@tanstack/react-query'
import { api, unwrap } from '../../api/client'
import type { TrainingAlgorithm } from './algorithms'
import { fetchAllMetrics } from './queries'
import { documentedPace, measuredPace, type Pace } from './wizardLogic'

type Stage = 'sl' | 'dpo' | 'rl' | 'rm'

export function stagesOf(algorithm: TrainingAlgorithm): Stage[] {
  return algorithm === 'rlhf' ? ['sl', 'rm', 'rl'] : [algorithm]
}

export function usePaces(algorithm: TrainingAlgorithm, baseModel: string, backend: 'local' | 'tinker', enabled: boolean) {
  return useQuery({
    queryKey: ['training-pace', algorithm, baseModel, backend],
    enabled,
    staleTime: 60_000,
    queryFn: async (): Promise<(Pace | null)[]> => {
      const jobs = unwrap(
        await api.GET('/api/jobs', { params: { query: { algorithm, state: 'succeeded', backend, limit: 20 } } }),
      )
      const previous = jobs.data.find((j) => j.base_model === baseModel)
      const rows = previous ? (await fetchAllMetrics(previous.id)).data : []
      return stagesOf(algorithm).map((stage) => {
        const own = algorithm === 'rlhf' ? rows.filter((r) => r.stage === stage) : rows
        return (previous && measuredPace(own, previous.name)) ?? documentedPace(stage, baseModel, backend)
      })
    },
  })
}
