// A reward model's reviews, on its page: start one (a preferences dataset, how many of its
// checkpoints make the committee, how many pairs the queue holds), the reviews it has had, and
// the queue of the one chosen (the newest finished, unless another is picked).
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { configSchema, datasetKinds } from '../../api/jobConfig'
import { PARAMS } from '../Training/algorithms'
import { DatasetSelect, ParamField } from '../Training/fields'
import { useCreateJob, useDatasets, type CreateJobError, type Job } from '../Training/queries'
import { checkNumber, ruleOf } from '../Training/validate'
import { Empty, ErrorState, Loading } from '../ui/States'
import { StatusLed } from '../ui/Status'
import { useReviewJobs, type ModelDetail } from './queries'
import { ReviewQueue } from './ReviewQueue'
import { latestReview, reviewRequest } from './review'

export function ReviewSection({ model }: { model: ModelDetail }) {
  const jobs = useReviewJobs(model.id)
  const [picked, setPicked] = useState<string | null>(null)
  const reviews = jobs.data?.data ?? []
  const shown = reviews.find((j) => j.id === picked) ?? latestReview(reviews)
  return (
    <div className="flex flex-col gap-5">
      <p className="text-sm text-neutral-400">
        Its last checkpoints, a committee, score every pair of a preferences dataset; the pairs they are least sure of, or disagree on,
        make a queue for you to answer blind. The review also shows how well calibrated the model is, and your answers make a new
        version of the dataset to retrain it on.
      </p>
      <StartReview model={model} onStarted={(job) => setPicked(job.id)} />
      {jobs.isLoading ? (
        <Loading what="its reviews" />
      ) : jobs.isError ? (
        <ErrorState error={jobs.error} what="its reviews" />
      ) : reviews.length === 0 ? (
        <Empty title="No review yet" next="Choose a preferences dataset above and start one: the queue appears here when the committee has scored its pairs." />
      ) : (
        <>
          <ReviewJobs jobs={reviews} shown={shown?.id ?? null} onShow={setPicked} />
          {shown && (
            <div className="flex flex-col gap-3">
              <h3 className="text-sm font-medium text-neutral-200">
                <Link to={`/training/${shown.id}`} className="hover:text-accent">{shown.name}</Link>
              </h3>
              <ReviewQueue key={shown.id} job={shown} />
            </div>
          )}
        </>
      )}
    </div>
  )
}

const SETTINGS = PARAMS.review.filter((p) => p.key === 'committee' || p.key === 'queue_size')

function StartReview({ model, onStarted }: { model: ModelDetail; onStarted: (job: Job) => void }) {
  const datasets = useDatasets()
  const create = useCreateJob()
  const [datasetId, setDatasetId] = useState('')
  const [settings, setSettings] = useState<Record<string, string>>({})
  const schema = configSchema('review')
  const errors = Object.fromEntries(SETTINGS.map((p) => [p.key, checkNumber(settings[p.key] ?? '', ruleOf(schema, p.key))]))
  const canStart = !!datasetId && Object.values(errors).every((e) => e === null) && !create.isPending
  const refused = create.error as CreateJobError | null
  const start = (e: React.FormEvent) => {
    e.preventDefault()
    if (canStart) create.mutate(reviewRequest(model, datasetId, settings), { onSuccess: onStarted })
  }
  return (
    <form onSubmit={start} aria-label="start a review" className="flex flex-col gap-3">
      <div className="grid items-start gap-4 md:grid-cols-[minmax(0,2fr)_minmax(0,1fr)_minmax(0,1fr)]">
        {datasets.isLoading ? (
          <Loading what="datasets" />
        ) : datasets.isError ? (
          <ErrorState error={datasets.error} what="datasets" />
        ) : (
          <DatasetSelect id="rv-dataset" label="Preference pairs" kinds={datasetKinds('review')} datasets={datasets.data?.data ?? []} value={datasetId} onChange={setDatasetId} />
        )}
        {SETTINGS.map((p) => (
          <ParamField
            key={p.key}
            id={`rv-${p.key}`}
            spec={p}
            schema={schema}
            value={settings[p.key] ?? ''}
            error={errors[p.key]}
            onChange={(v) => setSettings((s) => ({ ...s, [p.key]: v }))}
          />
        ))}
      </div>
      <div className="flex flex-wrap items-center gap-3">
        <button type="submit" className="btn-cta" disabled={!canStart}>{create.isPending ? 'Starting…' : 'Start a review'}</button>
        <span className="text-xs text-neutral-500">
          Pairs it trained on say how well it fits them; held-out pairs, how well it generalises.
        </span>
      </div>
      {refused && <p role="alert" className="text-sm text-bad">{refused.problems?.length ? refused.problems.join('; ') : refused.message}</p>}
    </form>
  )
}

/** This model's reviews, newest first; the one whose queue is shown is marked. */
function ReviewJobs({ jobs, shown, onShow }: { jobs: Job[]; shown: string | null; onShow: (id: string) => void }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label="reviews">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">Review</th>
            <th className="px-3 py-2">State</th>
            <th className="px-3 py-2">Dataset</th>
            <th className="px-3 py-2">Created</th>
            <th className="px-3 py-2"><span className="sr-only">queue</span></th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((j) => (
            <tr key={j.id} data-testid={`review-${j.id}`} className={`border-t border-ink-700 ${j.id === shown ? 'bg-accent/5' : ''}`}>
              <td className="px-3 py-2">
                <Link to={`/training/${j.id}`} className="text-neutral-100 hover:text-accent">{j.name}</Link>
                <span className="ml-2 font-mono text-neutral-600">{j.id}</span>
              </td>
              <td className="px-3 py-2"><StatusLed state={j.state} /></td>
              <td className="px-3 py-2 font-mono text-neutral-400">
                {j.dataset_id ? <Link to={`/datasets/${j.dataset_id}`} className="hover:text-accent">{j.dataset_id}</Link> : '—'}
              </td>
              <td className="px-3 py-2 text-neutral-400">{new Date(j.created_at).toLocaleString()}</td>
              <td className="px-3 py-2 text-right">
                {j.id === shown ? (
                  <span className="text-accent">shown below</span>
                ) : (
                  <button type="button" className="text-accent hover:underline" onClick={() => onShow(j.id)}>Show its queue</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
