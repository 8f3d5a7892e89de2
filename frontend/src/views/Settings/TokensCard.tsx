// API tokens: create (shown once, with a copy button), list, revoke; and the token this
// browser sends, needed when the server requires auth.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { api, errorMessage, unwrap, type Schemas } from '../../api/client'
import { useUiStore } from '../../state/ui'

function when(seconds: number | null): string {
  return seconds === null ? 'never' : new Date(seconds * 1000).toLocaleString()
}

export function TokensCard({ authRequired }: { authRequired: boolean }) {
  const client = useQueryClient()
  const { token: browserToken, setToken } = useUiStore()
  const [name, setName] = useState('')
  const [created, setCreated] = useState<Schemas['TokenCreated'] | null>(null)
  const tokens = useQuery({ queryKey: ['tokens'], queryFn: async () => unwrap(await api.GET('/api/tokens')).data })
  const create = useMutation({
    mutationFn: async () => unwrap(await api.POST('/api/tokens', { body: { name: name.trim() } })),
    onSuccess: (token) => {
      setCreated(token)
      setName('')
      // With auth on, the dashboard itself needs a token: keep the new one for this browser.
      if (authRequired && !browserToken) setToken(token.token)
      void client.invalidateQueries({ queryKey: ['tokens'] })
    },
  })
  const revoke = useMutation({
    mutationFn: async (id: string) => unwrap(await api.DELETE('/api/tokens/{token_id}', { params: { path: { token_id: id } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: ['tokens'] }),
  })
  return (
    <section className="card flex flex-col gap-4">
      <div>
        <h2 className="font-semibold text-neutral-100">API tokens</h2>
        <p className="mt-1 text-sm text-neutral-400">
          Bearer tokens for the REST, OpenAI-style and Socket.IO APIs. {authRequired
            ? 'This server requires one on every call.'
            : 'This server is open on loopback; tokens are needed once it listens beyond it.'}
        </p>
      </div>
      <BrowserToken token={browserToken} setToken={setToken} />
      <form className="flex gap-2" onSubmit={(e) => { e.preventDefault(); if (name.trim()) create.mutate() }}>
        <input className="input flex-1" placeholder="Token name, e.g. laptop or ci" aria-label="Token name" maxLength={200}
          value={name} onChange={(e) => setName(e.target.value)} />
        <button className="btn-cta" type="submit" disabled={!name.trim() || create.isPending}>Create token</button>
      </form>
      {create.isError && <p role="alert" className="text-sm text-bad">{errorMessage(create.error)}</p>}
      {created && <NewToken token={created} stored={browserToken === created.token} onDismiss={() => setCreated(null)} />}
      {tokens.isError ? (
        <p role="alert" className="text-sm text-bad">Could not list tokens: {errorMessage(tokens.error)}. If the server requires auth, paste a token above.</p>
      ) : tokens.data && tokens.data.length === 0 ? (
        <p className="text-sm text-neutral-500">No tokens yet.</p>
      ) : (
        <table className="w-full text-sm">
          <thead>
            <tr className="text-left text-xs uppercase tracking-wider text-neutral-500">
              <th className="py-2 font-medium">Name</th><th className="font-medium">Prefix</th>
              <th className="font-medium">Created</th><th className="font-medium">Last used</th><th />
            </tr>
          </thead>
          <tbody>
            {tokens.data?.map((t) => (
              <tr key={t.id} className={`border-t border-ink-700 ${t.revoked ? 'text-neutral-600' : 'text-neutral-300'}`}>
                <td className="py-2">{t.name}</td>
                <td className="font-mono text-xs">{t.prefix}…</td>
                <td className="text-xs">{when(t.created_at)}</td>
                <td className="text-xs">{when(t.last_used_at)}</td>
                <td className="text-right">
                  {t.revoked ? <span className="text-xs uppercase">revoked</span> : (
                    <button className="btn-ghost px-2 py-1 text-xs hover:border-bad hover:text-bad" disabled={revoke.isPending}
                      onClick={() => { if (window.confirm(`Revoke “${t.name}”? Every client using it loses access.`)) revoke.mutate(t.id) }}>Revoke</button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

function NewToken({ token, stored, onDismiss }: { token: Schemas['TokenCreated']; stored: boolean; onDismiss: () => void }) {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    await navigator.clipboard?.writeText(token.token)
    setCopied(true)
  }
  return (
    <div role="status" className="rounded-xl border border-cta/50 bg-cta/10 p-4">
      <p className="text-sm font-medium text-cta">Token “{token.name}” created. Copy it now: it will not be shown again.</p>
      <div className="mt-2 flex gap-2">
        <code className="flex flex-1 items-center truncate rounded-lg bg-ink-950 px-3 py-2 font-mono text-xs text-neutral-100" data-testid="new-token">{token.token}</code>
        <button className="btn-ghost" onClick={() => void copy()}>{copied ? 'Copied ✓' : 'Copy'}</button>
        <button className="btn-ghost" onClick={onDismiss}>Done</button>
      </div>
      {stored && <p className="mt-2 text-xs text-neutral-400">This browser now uses it for its own calls.</p>}
    </div>
  )
}

function BrowserToken({ token, setToken }: { token: string; setToken: (t: string) => void }) {
  const [draft, setDraft] = useState('')
  return (
    <div className="rounded-xl border border-ink-700 bg-ink-800/50 p-3 text-sm">
      <span className="label">This browser's token</span>
      {token ? (
        <div className="flex items-center gap-3">
          <span className="font-mono text-xs text-neutral-300">{token.slice(0, 12)}…</span>
          <button className="btn-ghost ml-auto px-2 py-1 text-xs" onClick={() => setToken('')}>Forget</button>
        </div>
      ) : (
        <form className="flex gap-2" onSubmit={(e) => { e.preventDefault(); setToken(draft.trim()); setDraft('') }}>
          <input type="password" className="input flex-1 font-mono" placeholder="none — paste a thk_… token to use it here"
            aria-label="Browser token" value={draft} onChange={(e) => setDraft(e.target.value)} />
          <button className="btn-ghost" type="submit" disabled={!draft.trim()}>Use</button>
        </form>
      )}
    </div>
  )
}
