// A Server-Sent Events parser for `fetch` bodies: network chunks split events anywhere
// (mid-line, mid-"\r\n"), so bytes are buffered until a blank line ends an event.

/** One event of POST /api/sample/stream, as the server documents it. */
export interface StreamEvent {
  text?: string
  token?: number
  stop_reason?: 'stop' | 'length'
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
  error?: { message: string; type?: string }
}

export type SseItem = { type: 'done' } | { type: 'event'; event: StreamEvent }

export interface SseParser {
  /** Feed a decoded chunk; returns the events it completed. */
  push(chunk: string): SseItem[]
  /** The stream ended: a last event without its blank line still counts. */
  flush(): SseItem[]
}

function parseEvent(block: string): SseItem | null {
  // An event's data is its `data:` lines joined by "\n" (the SSE spec); other fields are unused.
  const data = block
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, ''))
    .join('\n')
  if (!data) return null
  if (data === '[DONE]') return { type: 'done' }
  try {
    return { type: 'event', event: JSON.parse(data) as StreamEvent }
  } catch {
    return { type: 'event', event: { error: { message: `unreadable event: ${data.slice(0, 80)}` } } }
  }
}

export function createSseParser(): SseParser {
  let buffer = ''
  const drain = (final: boolean): SseItem[] => {
    buffer = buffer.replace(/\r\n?/g, '\n')
    // A trailing "\r" may be half of a "\r\n" still in flight: keep it for the next chunk.
    const items: SseItem[] = []
    let end = buffer.indexOf('\n\n')
    while (end !== -1) {
      const item = parseEvent(buffer.slice(0, end))
      if (item) items.push(item)
      buffer = buffer.slice(end + 2)
      end = buffer.indexOf('\n\n')
    }
    if (final && buffer.trim()) {
      const item = parseEvent(buffer)
      if (item) items.push(item)
      buffer = ''
    }
    return items
  }
  return {
    push(chunk) {
      buffer += chunk
      if (buffer.endsWith('\r')) {
        const held = buffer.slice(0, -1)
        buffer = held
        const items = drain(false)
        buffer += '\r'
        return items
      }
      return drain(false)
    },
    flush: () => drain(true),
  }
}
