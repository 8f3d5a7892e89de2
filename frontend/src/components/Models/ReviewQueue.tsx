// One review job, as a person works through it: what the review found (the committee's agreement
// with the dataset's labels, the reviewed checkpoint's reliability table and its calibration
// error), then the queue, least certain first: each pair's prompt and its two answers side by
// side, blind, with "A is better" / "B is better" / "Tie". An answered pair shows which answer the
// dataset chose, whether the person agreed, and the model's P(A beats B), the committee's mean and
// each checkpoint's. The answers become a new version of the dataset, and the reviewed reward
// model is retrained on it (an rm job, whose page opens). Polled while the job runs; the findings
// and the queue come when it has finished (models/queries.ts, useJobReview).
import { useState } from 'react'
import { Link, useNavigate } from 'react-router-dom'
import { errorMessage } from '../../api/client'
import { isLive } from '../../api/vocabulary'
import { useCreateJob, useDatasets, type CreateJobError, type Job } from '../Training/queries'
import { Chip } from '../ui/Chip'
import { Section } from '../ui/Section'
import { Empty, ErrorState, Loading } from '../ui/States'
import { ProgressBar } from '../ui/Status'
import { useAnswerReview, useJobReview, useReviewDataset } from './queries'
import {
  agreement,
  binRange,
  calibrationVerdict,
  checkpointLabel,
  CHOICES,
  preferred,
  promptMessages,
  retrainRequest,
  share,
  type Calibration,
  type Choice,
  type ReviewItem,
  type ReviewSummary,
} from './review'

/** A review job's page: its findings and its queue. */
export function ReviewPanel({ job }: { job: Job }) {
  return (
    <Section
      title="Review"
      aside={
        <p className="text-xs text-neutral-500">
          The reward model's last checkpoints (a committee) scored every pair of the dataset; the pairs they are least sure of, or
          disagree on, make the queue. Answer each without seeing the dataset's label: it is shown once you have.
        </p>
      }
    >
      <ReviewQueue job={job} />
    </Section>
  )
}

export function ReviewQueue({ job }: { job: Job }) {
  const live = isLive(job.state)
  const review = useJobReview(job.id, live)
  const answer = useAnswerReview(job.id)
  if (review.isLoading) return <Loading what="the review" />
  if (review.isError || !review.data) return <ErrorState error={review.error} what="the review" />
  const { summary, data: queue, answered } = review.data
  if (!summary) return <Waiting job={job} live={live} />
  const checkpoints = summary.checkpoints.map((c) => checkpointLabel(c.weights))
  const answering = answer.isPending ? answer.variables?.pair : undefined
  return (
    <div className="flex flex-col gap-5">
      <Findings summary={summary} />
      <div className="flex flex-col gap-3">
        <div className="flex flex-wrap items-center justify-between gap-2">
          <h3 className="label mb-0">Queue · least certain first</h3>
          <span className="text-xs text-neutral-400" data-testid="review-progress">
            <b className="font-mono text-neutral-100">{answered}</b> / {queue.length} answered
          </span>
        </div>
        <ProgressBar value={queue.length ? answered / queue.length : 0} />
        <ol className="flex flex-col gap-3" aria-label="review queue">
          {queue.map((item, i) => (
            <QueueItem
              key={item.pair}
              item={item}
              rank={i + 1}
              checkpoints={checkpoints}
              pending={answering === item.pair}
              error={answer.isError && answer.variables?.pair === item.pair ? errorMessage(answer.error) : null}
              onAnswer={(choice) => answer.mutate({ pair: item.pair, choice })}
            />
          ))}
        </ol>
      </div>
      <NewVersion job={job} />
    </div>
  )
}

/** Before the findings: how far the committee has got, or why there are none. */
function Waiting({ job, live }: { job: Job; live: boolean }) {
  return (
    <Empty
      title="No queue yet"
      next={
        live
          ? `The committee's checkpoints score the pairs one after the other (${job.step} of ${job.total_steps ?? '?'} done); the findings and the queue appear here once the last one has.`
          : job.state === 'succeeded'
            ? 'This job wrote no review.'
            : 'This job ended before its committee had scored every pair: it has no queue.'
      }
    />
  )
}

/** The committee's agreement and the reviewed checkpoint's reliability table. */
function Findings({ summary }: { summary: ReviewSummary }) {
  return (
    <div className="flex flex-col gap-4">
      <p className="text-sm text-neutral-300" data-testid="review-facts">
        <b className="font-mono">{summary.pairs}</b> pairs scored by a committee of <b className="font-mono">{summary.committee}</b>{' '}
        {summary.committee === 1 ? 'checkpoint' : 'checkpoints'} · <b className="font-mono">{share(summary.unanimous)}</b> unanimous (every
        checkpoint judged them alike) · the <b className="font-mono">{summary.queue_size}</b> least certain queued
      </p>
      <div className="grid gap-4 xl:grid-cols-[minmax(0,2fr)_minmax(0,3fr)]">
        <div>
          <h3 className="label">Agreement with the dataset's labels</h3>
          <div className="overflow-x-auto rounded-xl border border-ink-700">
            <table className="w-full text-left text-xs" aria-label="checkpoints">
              <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
                <tr>
                  <th className="px-3 py-2">Checkpoint</th>
                  <th className="px-3 py-2">Agrees</th>
                </tr>
              </thead>
              <tbody>
                {summary.checkpoints.map((c, i) => (
                  <tr key={c.weights} data-testid={`checkpoint-${i}`} className="border-t border-ink-700">
                    <td className="px-3 py-2">
                      <span className="flex flex-wrap items-center gap-2">
                        <span className="font-mono text-neutral-200" title={c.weights}>{checkpointLabel(c.weights)}</span>
                        {i === summary.checkpoints.length - 1 && <Chip tone="accent">reviewed</Chip>}
                      </span>
                    </td>
                    <td className="px-3 py-2 font-mono text-neutral-100">{share(c.accuracy)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
        <ReliabilityTable calibration={summary.calibration} />
      </div>
    </div>
  )
}

const VERDICT_TONE = { calibrated: 'text-ok', overconfident: 'text-warn', underconfident: 'text-warn' } as const

/** How sure the reviewed checkpoint was against how often the dataset agreed with it, by bins
 * of its confidence max(P, 1 − P). */
function ReliabilityTable({ calibration: c }: { calibration: Calibration }) {
  const verdict = calibrationVerdict(c)
  return (
    <div>
      <h3 className="label">Reliability of the reviewed checkpoint</h3>
      <div className="overflow-x-auto rounded-xl border border-ink-700">
        <table className="w-full text-left text-xs" aria-label="reliability">
          <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
            <tr>
              <th className="px-3 py-2">Confidence</th>
              <th className="px-3 py-2">Pairs</th>
              <th className="px-3 py-2">Mean confidence</th>
              <th className="px-3 py-2">Accuracy</th>
              <th className="w-1/4 px-3 py-2"><span className="sr-only">accuracy against confidence</span></th>
            </tr>
          </thead>
          <tbody>
            {c.bins.map((bin) => (
              <tr key={bin.low} data-testid={`bin-${binRange(bin)}`} className="border-t border-ink-700">
                <td className="px-3 py-2 font-mono text-neutral-300">{binRange(bin)}</td>
                <td className="px-3 py-2 font-mono text-neutral-300">{bin.pairs}</td>
                <td className="px-3 py-2 font-mono text-neutral-100">{share(bin.confidence)}</td>
                <td className={`px-3 py-2 font-mono ${bin.accuracy + 0.05 < bin.confidence ? 'text-warn' : 'text-neutral-100'}`}>{share(bin.accuracy)}</td>
                <td className="px-3 py-2">
                  <div className="relative h-2 rounded-full bg-ink-700" role="img" aria-label={`accuracy ${share(bin.accuracy)} at confidence ${share(bin.confidence)}`}>
                    <div className="absolute inset-y-0 left-0 rounded-full bg-accent/60" style={{ width: share(bin.accuracy) }} />
                    <div className="absolute -inset-y-1 w-px bg-neutral-200" style={{ left: share(bin.confidence) }} title="mean confidence" />
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="mt-2 text-xs text-neutral-400" data-testid="calibration">
        Calibration error (ECE) <b className="font-mono text-neutral-100">{c.ece.toFixed(3)}</b> · says {share(c.confidence)} on average, right{' '}
        {share(c.accuracy)} of the time: <span className={VERDICT_TONE[verdict]}>{verdict}</span>. On pairs it trained on this says how well
        it fits them, not how well it generalises.
      </p>
    </div>
  )
}

/** One queued pair: blind until answered, then its label and the model's probabilities. */
function QueueItem({
  item,
  rank,
  checkpoints,
  pending,
  error,
  onAnswer,
}: {
  item: ReviewItem
  rank: number
  /** The committee's checkpoints, oldest first (as p_a). */
  checkpoints: string[]
  pending: boolean
  error: string | null
  onAnswer: (choice: Choice) => void
}) {
  const revealed = item.label !== null
  return (
    <li aria-label={`pair ${item.pair}`} data-testid={`pair-${item.pair}`} className="flex flex-col gap-3 rounded-xl border border-ink-700 bg-ink-800/60 p-4">
      <div className="flex flex-wrap items-center gap-x-4 gap-y-1 text-xs text-neutral-400">
        <span className="font-mono text-neutral-500">#{rank}</span>
        <span>pair {item.pair} · line {item.line}</span>
        <span title="The binary entropy of the committee's mean P(A beats B): 1 bit when it is 1/2, near 0 when every checkpoint is sure">
          uncertainty <b className="font-mono text-neutral-100" data-testid="uncertainty">{item.uncertainty.toFixed(2)}</b> bits
        </span>
        <span title="The standard deviation of the checkpoints' P(A beats B): high when they disagree">
          disagreement <b className="font-mono text-neutral-100" data-testid="disagreement">{item.disagreement.toFixed(2)}</b>
        </span>
        {item.answer !== null && <span className="ml-auto"><Chip tone="ok">answered</Chip></span>}
      </div>
      <Prompt messages={item.prompt} />
      <div className="grid gap-3 md:grid-cols-2">
        <Answer side="a" text={item.a} chosen={revealed && item.label === 'a'} picked={item.answer === 'a'} />
        <Answer side="b" text={item.b} chosen={revealed && item.label === 'b'} picked={item.answer === 'b'} />
      </div>
      <div role="group" aria-label="Which answer is better?" className="flex flex-wrap items-center gap-2">
        {CHOICES.map((c) => (
          <button
            key={c.id}
            type="button"
            aria-pressed={item.answer === c.id}
            className={item.answer === c.id ? 'btn-cta' : 'btn-ghost'}
            disabled={pending}
            onClick={() => onAnswer(c.id)}
          >
            {c.label}
          </button>
        ))}
        {pending && <span className="text-xs text-neutral-500">saving…</span>}
      </div>
      {error && <p role="alert" className="text-xs text-bad">{error}</p>}
      {revealed && <Reveal item={item} checkpoints={checkpoints} />}
    </li>
  )
}

function Prompt({ messages }: { messages: ReviewItem['prompt'] }) {
  return (
    <div className="flex max-h-48 flex-col gap-1 overflow-auto text-xs" data-testid="prompt">
      {promptMessages(messages).map((m, i) => (
        <p key={i} className="whitespace-pre-wrap break-words">
          <span className="mr-2 font-mono uppercase tracking-wider text-neutral-500">{m.role}</span>
          <span className="text-neutral-200">{m.text}</span>
        </p>
      ))}
    </div>
  )
}

/** One of the two answers; once the pair is answered, marked if the dataset chose it. */
function Answer({ side, text, chosen, picked }: { side: 'a' | 'b'; text: string; chosen: boolean; picked: boolean }) {
  return (
    <div data-testid={`answer-${side}`} className={`flex flex-col gap-2 rounded-xl border bg-ink-900 p-3 ${chosen ? 'border-ok/50' : 'border-ink-700'}`}>
      <div className="flex flex-wrap items-center gap-2">
        <span className="rounded-md bg-ink-700 px-1.5 py-0.5 font-mono text-xs text-accent">{side.toUpperCase()}</span>
        {picked && <Chip tone="cta">your pick</Chip>}
        {chosen && <Chip tone="ok">the dataset's choice</Chip>}
      </div>
      <p className="max-h-72 overflow-auto whitespace-pre-wrap break-words font-mono text-xs text-neutral-200">
        {text === '' ? <i className="text-neutral-600">(empty)</i> : text}
      </p>
    </div>
  )
}

const AGREEMENT: Record<'agree' | 'disagree' | 'tie', { text: string; tone: string }> = {
  agree: { text: 'You agreed with the dataset', tone: 'text-ok' },
  disagree: { text: 'You disagreed with the dataset', tone: 'text-warn' },
  tie: { text: 'You called it a tie', tone: 'text-neutral-200' },
}

/** What an answered pair shows: the dataset's label, and the model's P(A beats B). */
function Reveal({ item, checkpoints }: { item: ReviewItem; checkpoints: string[] }) {
  const stand = agreement(item)
  const model = item.p_mean === null ? null : preferred(item.p_mean)
  const each = item.p_a ?? []
  return (
    <div data-testid="reveal" className="flex flex-col gap-2 rounded-xl border border-ink-700 bg-ink-900 p-3 text-sm">
      <p>
        {stand && <span className={AGREEMENT[stand].tone}>{AGREEMENT[stand].text}</span>}: it chose{' '}
        <b className="font-mono" data-testid="label">{item.label?.toUpperCase()}</b>.
      </p>
      {item.p_mean !== null && (
        <p className="text-neutral-300">
          The reward model: P(A beats B) <b className="font-mono text-neutral-100" data-testid="p-mean">{share(item.p_mean)}</b>
          {each.length > 1 && " (the committee's mean)"} —{' '}
          {model === 'tie' ? 'it cannot tell them apart' : <>it prefers <b className="font-mono">{model?.toUpperCase()}</b></>}.
        </p>
      )}
      {each.length > 1 && (
        <ul className="flex flex-wrap gap-x-4 gap-y-1 text-xs text-neutral-400" aria-label="each checkpoint's P(A beats B)">
          {each.map((p, i) => (
            <li key={i}>
              {checkpoints[i] ?? `checkpoint ${i + 1}`}
              {i === each.length - 1 && ' (reviewed)'} <b className="font-mono text-neutral-200">{share(p)}</b>
            </li>
          ))}
        </ul>
      )}
    </div>
  )
}

/** The answers as a new version of the reviewed dataset, and the reward model retrained on it. */
function NewVersion({ job }: { job: Job }) {
  const navigate = useNavigate()
  const [name, setName] = useState('')
  const version = useReviewDataset(job.id)
  const retrain = useCreateJob()
  const made = version.data
  const retrainError = retrain.error as CreateJobError | null
  const reviewed = useDatasets().data?.data.find((d) => d.id === job.dataset_id)
  return (
    <section aria-label="new dataset version" className="flex flex-col gap-3 rounded-xl border border-ink-700 p-4">
      <h3 className="label mb-0">Your answers → a new dataset version</h3>
      <p className="text-xs text-neutral-400">
        A pair you judged the other way round from the dataset has its chosen and rejected answers swapped, a tie is dropped, the rest stay
        as they are. The reviewed dataset does not change. Answers can be changed until then.
      </p>
      <div className="flex flex-wrap items-end gap-2">
        <label className="flex flex-col">
          <span className="label">Version name</span>
          <input className="input w-72" value={name} placeholder={reviewed ? `default: ${reviewed.name} (reviewed)` : 'optional'} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="button" className="btn-ghost" disabled={version.isPending} onClick={() => version.mutate(name)}>
          Add answers as a new dataset version
        </button>
      </div>
      {version.isError && <p role="status" className="text-sm text-neutral-300" data-testid="version-message">{errorMessage(version.error)}</p>}
      {made && (
        <div className="flex flex-wrap items-center gap-3 text-sm text-neutral-300">
          <span data-testid="version-made">
            Made <Link to={`/datasets/${made.id}`} className="text-accent hover:underline">{made.name} v{made.version}</Link> ({made.num_rows} pairs).
          </span>
          {job.parent_model_id && (
            <button
              type="button"
              className="btn-cta"
              disabled={retrain.isPending}
              onClick={() => retrain.mutate(retrainRequest(job, made.id), { onSuccess: (created) => navigate(`/training/${created.id}`) })}
            >
              Retrain the reward model on it
            </button>
          )}
        </div>
      )}
      {retrainError && (
        <p role="alert" className="text-sm text-bad">{retrainError.problems?.length ? retrainError.problems.join('; ') : retrainError.message}</p>
      )}
    </section>
  )
}
