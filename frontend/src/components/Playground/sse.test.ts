import { describe, expect, test } from 'vitest'
import { createSseParser, type SseItem } from './sse'

const texts = (items: SseItem[]) => items.map((i) => (i.type === 'done' ? '[DONE]' : i.event.text ?? JSON.stringify(i.event)))

describe('createSseParser', () => {
  test('events split across chunks mid-line and mid-JSON come out whole', () => {
    const parser = createSseParser()
    const stream = 'data: {"text": "Hel", "token": 1}\n\ndata: {"text": "lo", "token": 2}\n\ndata: [DONE]\n\n'
    const items: SseItem[] = []
    for (const chunk of [stream.slice(0, 9), stream.slice(9, 37), stream.slice(37, 40), stream.slice(40)])
      items.push(...parser.push(chunk))
    expect(texts(items)).toEqual(['Hel', 'lo', '[DONE]'])
  })

  test('an event is only emitted once its blank line arrives', () => {
    const parser = createSseParser()
    expect(parser.push('data: {"text": "a"}\n')).toEqual([])
    expect(texts(parser.push('\n'))).toEqual(['a'])
  })

  test('CRLF line endings, even split between the \\r and the \\n', () => {
    const parser = createSseParser()
    const items = [...parser.push('data: {"text": "x"}\r\n\r'), ...parser.push('\ndata: [DONE]\r\n\r\n')]
    expect(texts(items)).toEqual(['x', '[DONE]'])
  })

  test('the final event carries stop_reason and usage; errors come through as events', () => {
    const parser = createSseParser()
    const items = parser.push(
      'data: {"text": "", "stop_reason": "length", "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}\n\n' +
      'data: {"error": {"message": "boom", "type": "server_error"}}\n\n',
    )
    expect(items).toEqual([
      { type: 'event', event: { text: '', stop_reason: 'length', usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } } },
      { type: 'event', event: { error: { message: 'boom', type: 'server_error' } } },
    ])
  })

  test('flush emits a last event the stream ended without a blank line', () => {
    const parser = createSseParser()
    expect(parser.push('data: [DONE]')).toEqual([])
    expect(parser.flush()).toEqual([{ type: 'done' }])
  })
})
