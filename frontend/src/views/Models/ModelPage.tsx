// One model: its lineage, lifecycle, the file actions, and comparison with another model; a
// reward model, its reviews too (the pairs it is least sure of, for a person to answer).
import { useState } from 'react'
import { Link, useNavigate, useParams } from 'react-router-dom'
import { LifecycleSelect } from '../../components/Models/LifecycleSelect'
import { LineagePanel } from '../../components/Models/LineagePanel'
import { ExportPanel, ModelActions } from '../../components/Models/ModelActions'
import { ReviewSection } from '../../components/Models/ReviewSection'
import { useModel, useModels, type ModelDetail } from '../../components/Models/queries'
import { formatDate } from '../../components/Datasets/format'
import { Section } from '../../components/ui/Section'
import { ErrorState, Loading } from '../../components/ui/States'

export function ModelPage() {
  const { id = '' } = useParams()
  const model = useModel(id)
  if (model.isPending) return <Loading what="model" />
  if (model.isError) return <><BackLink /><ErrorState error={model.error} what={`model ${id}`} /></>
  const m = model.data
  return (
    <div className="flex flex-col gap-5">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <BackLink />
          <h1 className="text-2xl font-semibold text-neutral-100">{m.name}</h1>
          <div className="mt-1 flex flex-wrap items-center gap-3 text-sm text-neutral-400">
            <span className="font-mono">{m.id}</span>
            <span>{formatDate(m.created_at)}</span>
            <LifecycleSelect id={m.id} name={m.name} lifecycle={m.lifecycle} />
          </div>
        </div>
        <ModelActions model={m} />
      </header>
      <Section title="Lineage"><LineagePanel model={m} /></Section>
      <div className="grid gap-5 xl:grid-cols-2">
        <Section title="Export merged"><ExportPanel model={m} /></Section>
        <Section title="Compare"><ComparePicker model={m} /></Section>
      </div>
      {m.stage === 'rm' && <Section title="Review"><ReviewSection model={m} /></Section>}
    </div>
  )
}

function BackLink() {
  return <Link to="/models" className="text-xs uppercase tracking-wider text-neutral-500 hover:text-accent">← models</Link>
}

/** Models of the same base model first: a comparison across base models is rarely meant. */
function ComparePicker({ model }: { model: ModelDetail }) {
  const navigate = useNavigate()
  const others = useModels({}).data?.data.filter((m) => m.id !== model.id) ?? []
  others.sort((a, b) => Number(b.base_model === model.base_model) - Number(a.base_model === model.base_model))
  const [other, setOther] = useState('')
  return (
    <div className="flex flex-col gap-3 text-sm">
      <p className="text-neutral-400">Send the same prompt to this model and another one, side by side in the playground.</p>
      <div className="flex flex-wrap gap-2">
        <select className="input max-w-sm" aria-label="compare with" value={other} onChange={(e) => setOther(e.target.value)}>
          <option value="">choose a model…</option>
          <option value={model.base_model}>{model.base_model} (the base model)</option>
          {others.map((m) => <option key={m.id} value={m.id}>{m.name} · {m.base_model}</option>)}
        </select>
        <button type="button" className="btn-cta" disabled={!other}
          onClick={() => navigate(`/playground?a=${encodeURIComponent(model.id)}&b=${encodeURIComponent(other)}`)}>
          Compare
        </button>
      </div>
    </div>
  )
}
