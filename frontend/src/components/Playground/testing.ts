// Test helpers of the playground: the network is the only thing replaced. JSON routes answer as
// the Datasets helpers' do; POST /api/sample/stream answers as Server-Sent Events with the text
// `answer` gives for the model and messages asked (recorded with the other requests).
import type { Mock } from 'vitest'
import { serve, type RouteTable, type Sent } from '../Datasets/testing'
import type { Message } from './feedback'

export { renderAt, type Sent } from '../Datasets/testing'

/** A streamed answer: two text events, the stop event, then [DONE]. */
export function sseResponse(text: string): Response {
  const half = Math.ceil(text.length / 2)
  const events = [
    { text: text.slice(0, half) },
    { text: text.slice(half) },
    { text: '', stop_reason: 'stop' },
  ].map((e) => `data: ${JSON.stringify(e)}\n\n`)
  const encoder = new TextEncoder()
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const e of [...events, 'data: [DONE]\n\n']) controller.enqueue(encoder.encode(e))
      controller.close()
    },
  })
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } })
}

export function servePlayground(
  fetchMock: Mock,
  routes: RouteTable,
  answer: (model: string, messages: Message[]) => string,
): Sent[] {
  const sent = serve(fetchMock, routes)
  const json = fetchMock.getMockImplementation()
  fetchMock.mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    // streamSample calls fetch itself, with the path and a JSON string body.
    if (input === '/api/sample/stream') {
      const body = JSON.parse(String(init?.body)) as { model: string; messages: Message[] }
      sent.push({ method: 'POST', path: input, search: '', body })
      return sseResponse(answer(body.model, body.messages))
    }
    return json?.(input, init)
  })
  return sent
}
