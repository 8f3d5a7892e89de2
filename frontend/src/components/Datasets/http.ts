// Requests the generated client does not fit well: multipart uploads (the file is read by
// the browser, not serialised as JSON) and file downloads (a plain <a href> would not carry
// the API token, so the file is fetched and handed to the browser as a blob).
import type { Schemas } from '../../api/client'
import { errorMessage } from '../../api/client'
import { useUiStore } from '../../state/ui'

export type Kind = Schemas['DatasetPublic']['kind']
export type Mapping = Record<string, string>
export type Detection = Schemas['DetectionPublic']
export type Rejection = Schemas['UploadRejectedPublic']

function authHeaders(): HeadersInit {
  const token = useUiStore.getState().token
  return token ? { Authorization: `Bearer ${token}` } : {}
}

/** A failed request with the server's JSON body kept, so a 422's `errors` can be shown. */
export class HttpError extends Error {
  readonly status: number
  readonly body: unknown
  constructor(status: number, body: unknown) {
    super(errorMessage(body ?? `HTTP ${status}`))
    this.status = status
    this.body = body
  }
}

export interface DatasetForm {
  file: File
  kind?: Kind | null
  mapping?: Mapping | null
  name?: string
  parentId?: string
}

function toFormData(form: DatasetForm): FormData {
  const data = new FormData()
  data.append('file', form.file)
  if (form.kind) data.append('kind', form.kind)
  if (form.mapping && Object.keys(form.mapping).length) {
    data.append('mapping', JSON.stringify(form.mapping))
  }
  if (form.name) data.append('name', form.name)
  if (form.parentId) data.append('parent_id', form.parentId)
  return data
}

async function postForm<T>(path: string, form: DatasetForm): Promise<T> {
  const response = await fetch(path, { method: 'POST', body: toFormData(form), headers: authHeaders() })
  const body: unknown = await response.json().catch(() => null)
  if (!response.ok) throw new HttpError(response.status, body)
  return body as T
}

/** POST /api/datasets/detect: what the file holds and its validation; stores nothing. */
export function detectDataset(form: DatasetForm): Promise<Detection> {
  return postForm<Detection>('/api/datasets/detect', form)
}

/** POST /api/datasets: stores the file (422 with line-numbered errors when a row is bad). */
export function storeDataset(form: DatasetForm): Promise<Schemas['DatasetPublic']> {
  return postForm<Schemas['DatasetPublic']>('/api/datasets', form)
}

/** The rejection body of a 422 upload, when the error is one. */
export function rejectionOf(error: unknown): Rejection | null {
  if (!(error instanceof HttpError) || error.status !== 422) return null
  const body = error.body as Partial<Rejection> | null
  return body && Array.isArray(body.errors) ? (body as Rejection) : null
}

function filenameFrom(response: Response, fallback: string): string {
  const header = response.headers.get('Content-Disposition') ?? ''
  const match = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(header)
  return match ? decodeURIComponent(match[1]) : fallback
}

/** Fetch a file with the API token and let the browser save it. */
export async function downloadFile(path: string, fallbackName: string): Promise<void> {
  const response = await fetch(path, { headers: authHeaders() })
  if (!response.ok) {
    throw new HttpError(response.status, await response.json().catch(() => null))
  }
  const url = URL.createObjectURL(await response.blob())
  const link = document.createElement('a')
  link.href = url
  link.download = filenameFrom(response, fallbackName)
  document.body.appendChild(link)
  link.click()
  link.remove()
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}
