// The typed API client: `schema.d.ts` is generated from the server's /openapi.json
// (`npm run gen:api`), never edited by hand.
import createClient from 'openapi-fetch'
import type { components, paths } from './schema'
import { useUiStore } from '../state/ui'

export type Schemas = components['schemas']

export const api = createClient<paths>({ baseUrl: '' })

// Every call carries the API token when one is set (servers that require auth).
api.use({
  onRequest({ request }) {
    const token = useUiStore.getState().token
    if (token) request.headers.set('Authorization', `Bearer ${token}`)
    return request
  },
})

/** The server's error message, whatever shape the error body has. */
export function errorMessage(error: unknown): string {
  if (!error) return 'unknown error'
  if (typeof error === 'string') return error
  if (error instanceof Error) return error.message
  const body = error as { detail?: unknown; error?: { message?: string } }
  if (typeof body.detail === 'string') return body.detail
  if (body.error?.message) return body.error.message
  return JSON.stringify(error)
}

/** Unwrap an openapi-fetch result: the data, or throw the server's message. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) {
    const err = new Error(errorMessage(result.error ?? `HTTP ${result.response.status}`))
    ;(err as Error & { body?: unknown }).body = result.error
    throw err
  }
  return result.data
}
