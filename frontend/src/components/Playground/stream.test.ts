import { afterEach, describe, expect, test, vi } from 'vitest'
import { streamSample } from './stream'

function sseResponse(chunks: string[]): Response {
  const encoder = new TextEncoder()
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c))
      controller.close()
    },
  })
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } })
}

afterEach(() => vi.unstubAllGlobals())

describe('streamSample', () => {
  test('posts the body and accumulates text over chunks split mid-event until [DONE]', async () => {
    const fetchMock = vi.fn(async () => sseResponse([
      'data: {"text": "1", "tok', 'en": 5}\n\ndata: {"text": "5", "token": 6}\n',
      '\ndata: {"text": "", "stop_reason": "stop", "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}\n\ndata: [DONE]\n\n',
      'data: {"text": "never read"}\n\n',
    ]))
    vi.stubGlobal('fetch', fetchMock)
    const seen: string[] = []
    const result = await streamSample({ model: 'thinker/tiny', messages: [{ role: 'user', content: '7+8' }] }, (t) => seen.push(t))
    expect(result).toEqual({ text: '15', stopReason: 'stop', completionTokens: 2 })
    expect(seen).toEqual(['1', '15'])
    const [url, init] = fetchMock.mock.calls[0] as unknown as [string, RequestInit]
    expect(url).toBe('/api/sample/stream')
    expect(JSON.parse(String(init.body))).toEqual({ model: 'thinker/tiny', messages: [{ role: 'user', content: '7+8' }] })
  })

  test('an error before streaming is the server message; one during it throws too', async () => {
    vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify({ detail: "no model 'x'" }), { status: 404 })))
    await expect(streamSample({ model: 'x', prompt: 'hi' }, () => undefined)).rejects.toThrow("no model 'x'")
    vi.stubGlobal('fetch', vi.fn(async () => sseResponse(['data: {"error": {"message": "out of memory"}}\n\ndata: [DONE]\n\n'])))
    await expect(streamSample({ model: 'y', prompt: 'hi' }, () => undefined)).rejects.toThrow('out of memory')
  })
})
