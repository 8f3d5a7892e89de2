// The Tinker API key: stored on the server, never shown back; only "set" or "not set".
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { api, errorMessage, unwrap } from '../../api/client'

export function TinkerKeyCard({ isSet }: { isSet: boolean }) {
  const client = useQueryClient()
  const [key, setKey] = useState('')
  const done = () => { setKey(''); void client.invalidateQueries({ queryKey: ['settings'] }) }
  const save = useMutation({
    mutationFn: async () => unwrap(await api.PUT('/api/settings/tinker-key', { body: { api_key: key.trim() } })),
    onSuccess: done,
  })
  const remove = useMutation({
    mutationFn: async () => unwrap(await api.DELETE('/api/settings/tinker-key')),
    onSuccess: done,
  })
  return (
    <section className="card flex flex-col gap-3">
      <div className="flex items-center gap-3">
        <h2 className="font-semibold text-neutral-100">Tinker API key</h2>
        <span className={`ml-auto flex items-center gap-2 text-xs uppercase tracking-wider ${isSet ? 'text-ok' : 'text-neutral-400'}`} data-testid="tinker-key-status">
          <span className={`led ${isSet ? 'bg-ok shadow-[0_0_8px_#22c55e]' : 'bg-neutral-600'}`} /> {isSet ? 'set' : 'not set'}
        </span>
      </div>
      <p className="text-sm text-neutral-400">
        Needed only for jobs on the Tinker backend and for sampling models trained there. The server keeps it in its
        data directory (mode 0600) and never sends it back.
      </p>
      <form className="flex gap-2" onSubmit={(e) => { e.preventDefault(); if (key.trim()) save.mutate() }}>
        <input type="password" className="input flex-1 font-mono" autoComplete="off" aria-label="Tinker API key"
          placeholder={isSet ? '•••••••• (enter a new key to replace it)' : 'paste your Tinker API key'}
          value={key} onChange={(e) => setKey(e.target.value)} />
        <button className="btn-cta" type="submit" disabled={!key.trim() || save.isPending}>{isSet ? 'Replace' : 'Save'}</button>
        {isSet && (
          <button className="btn-ghost hover:border-bad hover:text-bad" type="button" disabled={remove.isPending}
            onClick={() => { if (window.confirm('Remove the Tinker API key from the server?')) remove.mutate() }}>Delete</button>
        )}
      </form>
      {save.isError && <p role="alert" className="text-sm text-bad">Not saved: {errorMessage(save.error)}</p>}
      {remove.isError && <p role="alert" className="text-sm text-bad">Not removed: {errorMessage(remove.error)}</p>}
      {save.isSuccess && <p className="text-sm text-ok">Saved. Tinker jobs can start now.</p>}
    </section>
  )
}
