// An API key the server stores (the Tinker key, an external judge endpoint's key with the one
// URL it is sent to): kept on the server, never shown back; only "set" or "not set".
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState, type ReactNode } from 'react'
import { api, errorMessage, unwrap } from '../../api/client'

export type StoredKey = 'tinker' | 'judge'

const KEYS: Record<StoredKey, { title: string; placeholder: string; saved: string }> = {
  tinker: { title: 'Tinker API key', placeholder: 'paste your Tinker API key', saved: 'Saved. Tinker jobs can start now.' },
  judge: { title: 'Judge endpoint API key', placeholder: "paste the judge endpoint's API key", saved: 'Saved. Eval jobs with an external judge send it.' },
}

async function put(which: StoredKey, key: string, url: string) {
  return which === 'tinker'
    ? unwrap(await api.PUT('/api/settings/tinker-key', { body: { api_key: key } }))
    : unwrap(await api.PUT('/api/settings/judge-key', { body: { api_key: key, url } }))
}

async function remove(which: StoredKey) {
  return which === 'tinker'
    ? unwrap(await api.DELETE('/api/settings/tinker-key'))
    : unwrap(await api.DELETE('/api/settings/judge-key'))
}

/** `endpoint`: the judge key's URL as stored (the judge card only). */
export function ApiKeyCard({ which, isSet, endpoint, children }: { which: StoredKey; isSet: boolean; endpoint?: string | null; children: ReactNode }) {
  const client = useQueryClient()
  const [key, setKey] = useState('')
  const [url, setUrl] = useState('')
  const { title, placeholder, saved } = KEYS[which]
  const needsUrl = which === 'judge'
  const ready = key.trim() !== '' && (!needsUrl || /^https?:\/\/\S+$/.test(url.trim()))
  const done = () => { setKey(''); void client.invalidateQueries({ queryKey: ['settings'] }) }
  const save = useMutation({ mutationFn: async () => put(which, key.trim(), url.trim()), onSuccess: done })
  const forget = useMutation({ mutationFn: async () => remove(which), onSuccess: done })
  return (
    <section className="card flex flex-col gap-3">
      <div className="flex items-center gap-3">
        <h2 className="font-semibold text-neutral-100">{title}</h2>
        <span className={`ml-auto flex items-center gap-2 text-xs uppercase tracking-wider ${isSet ? 'text-ok' : 'text-neutral-400'}`} data-testid={`${which}-key-status`}>
          <span className={`led ${isSet ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-neutral-600'}`} /> {isSet ? 'set' : 'not set'}
        </span>
      </div>
      <p className="text-sm text-neutral-400">{children}</p>
      {needsUrl && isSet && endpoint && <p className="text-xs text-neutral-500">Sent only to <code className="text-accent">{endpoint}</code></p>}
      {needsUrl && (
        <input className="input font-mono" spellCheck={false} aria-label="Judge endpoint URL" placeholder="https://api.openai.com/v1 (the only endpoint the key is sent to)"
          value={url} onChange={(e) => setUrl(e.target.value)} />
      )}
      <form className="flex gap-2" onSubmit={(e) => { e.preventDefault(); if (ready) save.mutate() }}>
        <input type="password" className="input flex-1 font-mono" autoComplete="off" aria-label={title}
          placeholder={isSet ? '•••••••• (enter a new key to replace it)' : placeholder}
          value={key} onChange={(e) => setKey(e.target.value)} />
        <button className="btn-cta" type="submit" disabled={!ready || save.isPending}>{isSet ? 'Replace' : 'Save'}</button>
        {isSet && (
          <button className="btn-ghost hover:border-bad hover:text-bad" type="button" disabled={forget.isPending}
            onClick={() => { if (window.confirm(`Remove the ${title} from the server?`)) forget.mutate() }}>Delete</button>
        )}
      </form>
      {save.isError && <p role="alert" className="text-sm text-bad">Not saved: {errorMessage(save.error)}</p>}
      {forget.isError && <p role="alert" className="text-sm text-bad">Not removed: {errorMessage(forget.error)}</p>}
      {save.isSuccess && <p className="text-sm text-ok">{saved}</p>}
    </section>
  )
}
