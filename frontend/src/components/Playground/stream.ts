// Streaming a sample: POST /api/sample/stream read as SSE through fetch + ReadableStream
// (EventSource cannot POST a body or send the bearer token).
import { errorMessage, type Schemas } from '../../api/client'
import { useUiStore } from '../../state/ui'
import { createSseParser, type StreamEvent } from './sse'

export type SampleRequest = Schemas['SampleStreamCreate']

export interface StreamResult {
  text: string
  stopReason: string | null
  completionTokens: number | null
}

/** Streams one sample, calling `onText` with the whole text so far after each event. */
export async function streamSample(
  body: Partial<SampleRequest> & Pick<SampleRequest, 'model'>,
  onText: (text: string) => void,
  signal?: AbortSignal,
): Promise<StreamResult> {
  const token = useUiStore.getState().token
  const response = await fetch('/api/sample/stream', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
    signal,
  })
  if (!response.ok || !response.body) {
    // Errors found before streaming starts are ordinary JSON answers (404 / 422).
    const detail: unknown = await response.json().catch(() => `HTTP ${response.status}`)
    throw new Error(errorMessage(detail))
  }
  return readStream(response.body, onText)
}

async function readStream(
  stream: ReadableStream<Uint8Array>,
  onText: (text: string) => void,
): Promise<StreamResult> {
  const reader = stream.getReader()
  const decoder = new TextDecoder()
  const parser = createSseParser()
  const result: StreamResult = { text: '', stopReason: null, completionTokens: null }
  const apply = (event: StreamEvent) => {
    if (event.error) throw new Error(event.error.message)
    if (event.text) {
      result.text += event.text
      onText(result.text)
    }
    if (event.stop_reason) result.stopReason = event.stop_reason
    if (event.usage) result.completionTokens = event.usage.completion_tokens
  }
  for (;;) {
    const { value, done } = await reader.read()
    // `stream: true` keeps a multi-byte character split across chunks intact.
    const items = done ? parser.flush() : parser.push(decoder.decode(value, { stream: true }))
    for (const item of items) {
      if (item.type === 'done') {
        await reader.cancel().catch(() => undefined)
        return result
      }
      apply(item.event)
    }
    if (done) return result
  }
}

/** True for the error an aborted fetch throws (the user pressed Stop). */
export function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError'
}
