// Where feedback goes: a new dataset (multipart upload of a one-row JSONL file) or the next
// version of an existing one (POST /api/datasets/{id}/versions {"append": [row]}).
import { api, unwrap, type Schemas } from '../../api/client'
import { toJsonl, type FeedbackKind, type FeedbackRow } from './feedback'

export type Dataset = Schemas['DatasetPublic']

/** The newest version of each lineage: appending to an old version would fork its history. */
export function latestVersions(datasets: Dataset[]): Dataset[] {
  const newest = new Map<string, Dataset>()
  for (const d of datasets) {
    const root = d.root_id ?? d.id
    const seen = newest.get(root)
    if (!seen || d.version > seen.version) newest.set(root, d)
  }
  return [...newest.values()].sort((a, b) => Number(a.builtin) - Number(b.builtin) || a.name.localeCompare(b.name))
}

export async function listTargets(kind: FeedbackKind): Promise<Dataset[]> {
  const page = unwrap(await api.GET('/api/datasets', { params: { query: { kind, limit: 1000 } } }))
  return latestVersions(page.data)
}

export async function createFeedbackDataset(name: string, row: FeedbackRow, kind: FeedbackKind): Promise<Dataset> {
  const file = new File([toJsonl(row)], `${name}.jsonl`, { type: 'application/x-ndjson' })
  const result = await api.POST('/api/datasets', {
    // The generated type says `file: string` (OpenAPI's binary); the serializer sends the File.
    body: { file: '', name, kind },
    bodySerializer: () => {
      const form = new FormData()
      form.append('file', file)
      form.append('name', name)
      form.append('kind', kind)
      return form
    },
  })
  return unwrap(result)
}

export async function appendFeedback(datasetId: string, row: FeedbackRow): Promise<Dataset> {
  const result = await api.POST('/api/datasets/{dataset_id}/versions', {
    params: { path: { dataset_id: datasetId } },
    body: { append: [{ ...row }] },
  })
  return unwrap(result)
}
