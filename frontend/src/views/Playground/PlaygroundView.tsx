// The playground: chat, code review and A/B comparison against any base or trained model,
// with feedback saved as training data, learned from in place ("Learn from this": model n+1,
// its answer before and after), and A/B judged blind. ?model=<id> preselects; ?a=<id>&b=<id>
// opens A/B.
import { useState } from 'react'
import { Link, useSearchParams } from 'react-router-dom'
import { ErrorState, Loading } from '../../components/ui/States'
import { ABPanel } from '../../components/Playground/ABPanel'
import { BeforeAfter } from '../../components/Playground/BeforeAfter'
import { useBlind } from '../../components/Playground/blind'
import { ChatPanel } from '../../components/Playground/ChatPanel'
import { CodeReviewPanel } from '../../components/Playground/CodeReviewPanel'
import type { FeedbackRow } from '../../components/Playground/feedback'
import { FeedbackSaver } from '../../components/Playground/FeedbackSaver'
import { LearnControl } from '../../components/Playground/LearnControl'
import { switchModel, type Exchange, type Mode } from '../../components/Playground/learnFlow'
import { ModelPicker } from '../../components/Playground/ModelPicker'
import { useModelOptions, type ModelOption } from '../../components/Playground/models'
import { DEFAULT_SAMPLING, type SamplingParams } from '../../components/Playground/sampling'
import { SamplingControls } from '../../components/Playground/SamplingControls'
import { useLearn } from '../../components/Playground/useLearn'

const MODES: { id: Mode; label: string }[] = [
  { id: 'chat', label: 'Chat' },
  { id: 'review', label: 'Code review' },
  { id: 'ab', label: 'A/B compare' },
]

/** The model to start with: the URL's, else the newest trained model, else the tiny built-in. */
function defaultModel(options: ModelOption[]): string {
  return options.find((o) => !o.builtin)?.id ?? options.find((o) => o.id === 'thinker/tiny')?.id ?? options[0]?.id ?? ''
}

export function PlaygroundView() {
  const models = useModelOptions()
  return (
    <div className="mx-auto flex max-w-7xl flex-col gap-6">
      <header>
        <h1 className="text-2xl font-semibold text-neutral-100">Playground</h1>
        <p className="mt-1 text-sm text-neutral-400">
          Talk to a base model or any trained adapter, review code, compare two models side by side —
          and turn every good, bad or corrected answer into training data.
        </p>
      </header>
      {models.isPending ? (
        <Loading what="models" />
      ) : models.isError ? (
        <ErrorState error={models.error} what="the models" />
      ) : (
        <Workbench options={models.data} />
      )}
    </div>
  )
}

function Workbench({ options }: { options: ModelOption[] }) {
  const [params, setParams] = useSearchParams()
  const fallback = defaultModel(options)
  const [mode, setMode] = useState<Mode>(params.get('a') || params.get('b') ? 'ab' : 'chat')
  const [model, setModel] = useState(params.get('model') ?? fallback)
  const [a, setA] = useState(params.get('a') ?? params.get('model') ?? fallback)
  const [b, setB] = useState(params.get('b') ?? options.find((o) => o.id === a)?.model?.base_model ?? 'thinker/tiny')
  const [sampling, setSampling] = useState<SamplingParams>(DEFAULT_SAMPLING)
  const [pending, setPending] = useState<FeedbackRow | null>(null)
  const [exchanges, setExchanges] = useState<Exchange[]>([])
  const setBlind = useBlind((s) => s.setBlind)
  const option = (id: string) => options.find((o) => o.id === id)
  const label = (id: string) => option(id)?.label ?? id
  const name = (id: string) => option(id)?.model?.name ?? id
  // The URL follows the choice, so a comparison can be linked or reloaded.
  const syncUrl = (next: Record<string, string>) => setParams(next, { replace: true })
  const hasTrained = options.some((o) => !o.builtin)
  const pick = (next: Mode) => {
    setMode(next)
    // The other panel's conversation is gone: its answers are no "before" any more.
    if (next !== mode) setExchanges([])
    syncUrl(next === 'ab' ? { a, b } : { model })
  }
  // Model n+1 takes the learner's place (and the old model takes it back).
  const learn = useLearn({
    exchanges,
    onSwitch: (from, to) => {
      const next = switchModel({ model, a, b }, mode, from, to)
      setModel(next.model)
      setA(next.a)
      setB(next.b)
      syncUrl(mode === 'ab' ? { a: next.a, b: next.b } : { model: next.model })
    },
  })
  const judge = (old: string, next: string) => {
    learn.dismiss()
    setExchanges([])
    setMode('ab')
    setA(old)
    setB(next)
    setBlind(true)
    syncUrl({ a: old, b: next })
  }
  // Only library models learn (built-in base models have no training state to go on from).
  const learners = [...new Set(mode === 'ab' ? [a, b] : [model])]
    .map((id) => option(id))
    .filter((o): o is ModelOption => !!o?.model)

  return (
    <>
      <div className="flex items-center gap-1 self-start rounded-2xl border border-ink-700 bg-ink-900 p-1" role="tablist">
        {MODES.map((m) => (
          <button key={m.id} role="tab" aria-selected={mode === m.id}
            className={`rounded-xl px-4 py-1.5 text-sm transition ${mode === m.id ? 'bg-ink-700 text-accent shadow-[0_0_12px_rgba(14,165,233,0.2)]' : 'text-neutral-400 hover:text-neutral-100'}`}
            onClick={() => pick(m.id)}>
            {m.label}
          </button>
        ))}
      </div>
      <div className="grid grid-cols-[minmax(0,1fr)_280px] gap-6">
        <section className="min-w-0">
          {mode === 'chat' && <ChatPanel model={model} modelLabel={label} params={sampling} onSave={setPending} onExchange={setExchanges} />}
          {mode === 'review' && <CodeReviewPanel model={model} modelLabel={label} params={sampling} onSave={setPending} />}
          {mode === 'ab' && (
            <ABPanel a={a} b={b} modelLabel={label} modelName={name} params={sampling} onSave={setPending} onExchange={setExchanges} />
          )}
          {learn.state.phase === 'learned' && (
            <BeforeAfter key={learn.state.model.id} state={learn.state} modelLabel={label} params={sampling} onSave={setPending}
              onBack={learn.back} onForward={learn.forward} onDismiss={learn.dismiss} onJudge={judge} />
          )}
        </section>
        <aside className="card flex h-fit flex-col gap-5">
          {mode === 'ab' ? (
            <>
              <ModelPicker label="Model A" value={a} options={options} testId="model-a" onChange={(id) => { setA(id); syncUrl({ a: id, b }) }} />
              <ModelPicker label="Model B" value={b} options={options} testId="model-b" onChange={(id) => { setB(id); syncUrl({ a, b: id }) }} />
            </>
          ) : (
            <ModelPicker label="Model" value={model} options={options} testId="model" onChange={(id) => { setModel(id); syncUrl({ model: id }) }} />
          )}
          {!hasTrained && (
            <p className="text-xs text-neutral-500">
              Only base models so far. <Link className="text-accent hover:underline" to="/training">Train a job</Link> to
              sample your own adapter here.
            </p>
          )}
          {(mode !== 'review' || learn.state.phase !== 'idle') && (
            <>
              <div className="border-t border-ink-700" />
              <LearnControl state={learn.state} learners={learners} prefer={mode === 'ab' ? 'preferences' : 'chat'}
                pollError={learn.pollError} onStart={learn.start} onDismiss={learn.dismiss} />
            </>
          )}
          <div className="border-t border-ink-700" />
          <SamplingControls value={sampling} onChange={setSampling} />
        </aside>
      </div>
      {pending && <FeedbackSaver row={pending} onClose={() => setPending(null)} />}
    </>
  )
}
