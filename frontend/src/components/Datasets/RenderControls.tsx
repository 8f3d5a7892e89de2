// Base model / renderer / train_on_what / max_length: the same options training will use,
// so the preview and statistics show what a job with these settings would see.
import { useState } from 'react'
import { Field } from '../ui/fields'
import type { RenderOptions, TrainOnWhat } from './queries'

const BASE_MODELS = ['thinker/tiny', 'thinker/random-qwen3-0.6b', 'thinker/random-llama3.1-8b']
const RENDERERS = ['role_colon', 'llama3', 'qwen3', 'qwen3_disable_thinking', 'qwen3_instruct', 'chat_template']
const TRAIN_ON: TrainOnWhat[] = ['last_assistant_message', 'all_assistant_messages', 'all_messages', 'all_tokens', 'customized']

export function RenderControls({ value, onChange }: { value: RenderOptions; onChange: (v: RenderOptions) => void }) {
  // The form is edited locally and applied on submit, so typing a length does not refetch.
  const [draft, setDraft] = useState<RenderOptions>(value)
  return (
    <form
      className="flex flex-wrap items-end gap-3"
      onSubmit={(e) => {
        e.preventDefault()
        onChange(draft)
      }}
    >
      <Field label="base model">
        <input className="input font-mono" list="base-models" value={draft.base_model ?? ''} placeholder="thinker/tiny"
          onChange={(e) => setDraft({ ...draft, base_model: e.target.value || undefined })} />
        <datalist id="base-models">{BASE_MODELS.map((m) => <option key={m} value={m} />)}</datalist>
      </Field>
      <Field label="renderer">
        <select className="input" value={draft.renderer ?? ''} onChange={(e) => setDraft({ ...draft, renderer: e.target.value || undefined })}>
          <option value="">model default</option>
          {RENDERERS.map((r) => <option key={r} value={r}>{r}</option>)}
        </select>
      </Field>
      <Field label="train on">
        <select className="input" value={draft.train_on_what ?? ''}
          onChange={(e) => setDraft({ ...draft, train_on_what: (e.target.value || undefined) as TrainOnWhat | undefined })}>
          <option value="">default (last assistant message)</option>
          {TRAIN_ON.map((t) => <option key={t} value={t}>{t}</option>)}
        </select>
      </Field>
      <Field label="max length">
        <input className="input w-28 font-mono" type="number" min={1} value={draft.max_length ?? ''} placeholder="1024"
          onChange={(e) => setDraft({ ...draft, max_length: e.target.value ? Number(e.target.value) : undefined })} />
      </Field>
      <button type="submit" className="btn-ghost">Render</button>
    </form>
  )
}
