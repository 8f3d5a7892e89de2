// How an app uses a deployment: the /v1 chat completion with its name as the model, then the
// feedback on that answer by its id, as curl against this server (with the token header when
// the server requires one); copied with one click.
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { api, unwrap } from '../../api/client'
import { curlSnippet, type Deployment } from './deployments'

export function CallSnippet({ deployment: d }: { deployment: Deployment }) {
  const health = useQuery({ queryKey: ['health'], queryFn: async () => unwrap(await api.GET('/api/health')) })
  const [copied, setCopied] = useState(false)
  const text = curlSnippet(window.location.origin, d.name, !!health.data?.auth_required)
  const copy = async () => {
    await navigator.clipboard?.writeText(text)
    setCopied(true)
  }
  return (
    <div className="flex flex-col gap-3 text-sm">
      <p className="text-neutral-400">
        Any OpenAI client works: <code className="text-accent">base_url</code> this server's <code className="text-accent">/v1</code>,{' '}
        <code className="text-accent">model</code> <code className="text-accent">"{d.name}"</code>. Each answer's <code className="text-accent">id</code> takes
        a thumbs up or down, and the answer it should have given: the next cycle trains on them.
      </p>
      {!d.log_traffic && (
        <p className="text-xs text-warn">Traffic is not logged: the name answers, but its answers cannot take feedback until Log traffic is on.</p>
      )}
      <div className="relative">
        <pre className="overflow-x-auto rounded-xl bg-ink-950 p-4 font-mono text-xs leading-relaxed text-neutral-300" data-testid="call-snippet">{text}</pre>
        <button type="button" className="btn-ghost absolute right-2 top-2 px-2 py-1 text-xs" onClick={() => void copy()}>{copied ? 'Copied' : 'Copy'}</button>
      </div>
    </div>
  )
}
