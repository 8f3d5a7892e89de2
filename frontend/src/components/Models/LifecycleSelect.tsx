// The lifecycle state of a model, changed in place (PATCH). Labels only: an archived model
// can still be sampled and downloaded.
import { LIFECYCLES, useUpdateModel, type Lifecycle } from './queries'

const TONE: Record<Lifecycle, string> = {
  active: 'bg-ok shadow-[0_0_8px_#22c55e]',
  deprecated: 'bg-warn',
  archived: 'bg-neutral-500',
}

export function LifecycleLed({ lifecycle }: { lifecycle: Lifecycle }) {
  return <span className={`led ${TONE[lifecycle]}`} aria-hidden />
}

export function LifecycleSelect({ id, name, lifecycle }: { id: string; name: string; lifecycle: Lifecycle }) {
  const update = useUpdateModel()
  const shown = update.isPending && update.variables?.body.lifecycle ? update.variables.body.lifecycle : lifecycle
  return (
    <span className="inline-flex flex-col gap-1">
      <span className="inline-flex items-center gap-2">
        <LifecycleLed lifecycle={shown} />
        <select
          aria-label={`lifecycle of ${name}`}
          className="rounded-lg border border-ink-600 bg-ink-800 px-2 py-1 text-xs text-neutral-200 focus:border-accent focus:outline-none"
          value={shown}
          disabled={update.isPending}
          onChange={(e) => update.mutate({ id, body: { lifecycle: e.target.value as Lifecycle } })}
        >
          {LIFECYCLES.map((l) => <option key={l} value={l}>{l}</option>)}
        </select>
      </span>
      {update.isError && <span role="alert" className="text-xs text-bad">{update.error.message}</span>}
    </span>
  )
}
