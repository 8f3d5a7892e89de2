// The info panel: SL / DPO / RL / RLHF / RM (and batch answers, evaluations and reviews, which
// train nothing) explained (what, when, example data, loss), reachable from the job list, the
// new-job form and every wizard step.
import { useState } from 'react'
import { ALGORITHMS } from './algorithms'
import { Modal } from '../ui/Modal'

export function AlgorithmCards({ highlight }: { highlight?: string }) {
  return (
    <div className="grid gap-3 md:grid-cols-2">
      {ALGORITHMS.map((a) => (
        <section
          key={a.id}
          className={`rounded-xl border p-4 ${a.id === highlight ? 'border-accent/60 bg-accent/5' : 'border-ink-700 bg-ink-800/60'}`}
        >
          <h3 className="flex items-baseline gap-2 font-semibold text-neutral-100">
            <span className="rounded-md bg-ink-700 px-1.5 py-0.5 font-mono text-xs text-accent">{a.short}</span>
            {a.name}
          </h3>
          <dl className="mt-2 space-y-1.5 text-sm">
            <div><dt className="inline text-neutral-500">What: </dt><dd className="inline text-neutral-300">{a.what}</dd></div>
            <div><dt className="inline text-neutral-500">When: </dt><dd className="inline text-neutral-300">{a.when}</dd></div>
            <div><dt className="inline text-neutral-500">Loss: </dt><dd className="inline text-neutral-300">{a.loss}</dd></div>
            <div>
              <dt className="text-neutral-500">Example data:</dt>
              <dd><code className="mt-1 block overflow-x-auto rounded-lg bg-ink-950 p-2 font-mono text-xs text-neutral-300">{a.example}</code></dd>
            </div>
          </dl>
        </section>
      ))}
    </div>
  )
}

export function AlgorithmInfoButton({ highlight, label = 'SL, DPO, RL, RLHF — which one?' }: { highlight?: string; label?: string }) {
  const [open, setOpen] = useState(false)
  return (
    <>
      <button type="button" className="btn-ghost" onClick={() => setOpen(true)}>
        <span aria-hidden className="flex h-4 w-4 items-center justify-center rounded-full border border-accent text-[10px] font-bold leading-none text-accent">i</span> {label}
      </button>
      {open && (
        <Modal title="The ways to train, batch answers, evaluations and reviews" onClose={() => setOpen(false)} wide>
          <p className="mb-4 text-sm text-neutral-400">
            Start from the data you have. Examples of the right answer → SL. Pairs "this answer is
            better than that one" → DPO. A program that can check an answer → RL. Human judgements
            and the wish to keep improving on unlabelled prompts → RLHF. When unsure, start with SL:
            the later methods work best on a model that already answers in the right format. Only want a
            model's answers for a whole dataset, each with a confidence? → Batch: it trains nothing. Want to
            know whether one model really beats another on an eval set? → Eval: nor does it. A judge of your own, trained on
            pairs → RM; which pairs it is least sure of, for you to answer → Review, from the reward model's page.
          </p>
          <AlgorithmCards highlight={highlight} />
        </Modal>
      )}
    </>
  )
}
