// One streamed answer as React state, with an abort controller behind the Stop button.
import { useCallback, useEffect, useRef, useState } from 'react'
import type { Message } from './feedback'
import type { SamplingParams } from './sampling'
import { isAbort, streamSample } from './stream'

export interface StreamState {
  text: string
  streaming: boolean
  error: string | null
  stopReason: string | null
}

const IDLE: StreamState = { text: '', streaming: false, error: null, stopReason: null }

export function samplingBody(model: string, messages: Message[], params: SamplingParams) {
  return {
    model,
    messages: messages.map(({ role, content }) => ({ role, content })),
    temperature: params.temperature,
    top_p: params.top_p,
    max_tokens: params.max_tokens,
    ...(params.seed === null ? {} : { seed: params.seed }),
  }
}

export function useStream() {
  const [state, setState] = useState<StreamState>(IDLE)
  const controller = useRef<AbortController | null>(null)
  useEffect(() => () => controller.current?.abort(), [])

  /** Streams an answer; resolves with its text (what arrived, if stopped), or null on failure. */
  const start = useCallback(async (model: string, messages: Message[], params: SamplingParams): Promise<string | null> => {
    controller.current?.abort()
    const ctrl = new AbortController()
    controller.current = ctrl
    setState({ ...IDLE, streaming: true })
    let latest = ''
    try {
      const result = await streamSample(samplingBody(model, messages, params), (text) => {
        latest = text
        setState((s) => ({ ...s, text }))
      }, ctrl.signal)
      setState({ text: result.text, streaming: false, error: null, stopReason: result.stopReason })
      return result.text
    } catch (error) {
      // A stopped stream keeps what arrived; it is the user's choice, not an error.
      const message = isAbort(error) ? null : error instanceof Error ? error.message : String(error)
      setState((s) => ({ ...s, streaming: false, error: message, stopReason: isAbort(error) ? 'stopped' : null }))
      return isAbort(error) ? latest : null
    }
  }, [])

  const stop = useCallback(() => controller.current?.abort(), [])
  const reset = useCallback(() => { controller.current?.abort(); setState(IDLE) }, [])
  const setText = useCallback((text: string) => setState((s) => ({ ...s, text })), [])
  return { state, start, stop, reset, setText }
}
