// The leaderboard of an eval set: every model its finished eval jobs evaluated, ranked by a
// Bradley-Terry fit of all their pairwise results (GET /api/models/leaderboard), the first marked
// best for this eval set; the eval sets to choose from are those eval jobs used, then any other
// dataset an eval job can answer. No leaderboard yet: the server's reason, and how to get one.
import { Link } from 'react-router-dom'
import { datasetKinds } from '../../api/jobConfig'
import { Empty, ErrorState, Loading } from '../ui/States'
import { RatingsTable } from '../Training/Evaluation'
import type { LeaderboardEntry } from '../Training/evaluation'
import { scorerTypes } from '../Training/jobRequest'
import { useDatasets } from '../Training/queries'
import { useEvalJobs, useLeaderboard } from './queries'

export function LeaderboardPanel({
  datasetId,
  scorer,
  onChange,
}: {
  /** The eval set chosen; empty: the one the latest finished eval job used. */
  datasetId: string
  /** The scorer whose jobs count; empty: the latest job's. */
  scorer: string
  onChange: (choice: { datasetId: string; scorer: string }) => void
}) {
  const jobs = useEvalJobs()
  const datasets = useDatasets()
  const evaluated = [...new Set((jobs.data?.data ?? []).flatMap((j) => (j.dataset_id ? [j.dataset_id] : [])))]
  const chosen = datasetId || evaluated[0] || ''
  const board = useLeaderboard(chosen, scorer)
  const all = datasets.data?.data ?? []
  const kinds = datasetKinds('eval')
  const name = (id: string) => {
    const d = all.find((x) => x.id === id)
    return d ? `${d.name} v${d.version}` : id
  }
  const others = all.filter((d) => kinds.includes(d.kind) && !evaluated.includes(d.id))
  if (jobs.isLoading || datasets.isLoading) return <Loading what="the eval sets" />
  if (jobs.isError) return <ErrorState error={jobs.error} what="the eval jobs" />
  return (
    <div className="flex flex-col gap-4">
      <div className="flex flex-wrap items-end gap-3">
        <label className="flex flex-col">
          <span className="label">eval set</span>
          <select className="input" aria-label="eval set" value={chosen} onChange={(e) => onChange({ datasetId: e.target.value, scorer: '' })}>
            {!chosen && <option value="">choose an eval set…</option>}
            {evaluated.length > 0 && (
              <optgroup label="evaluated">
                {evaluated.map((id) => <option key={id} value={id}>{name(id)}</option>)}
              </optgroup>
            )}
            {others.length > 0 && (
              <optgroup label="not evaluated yet">
                {others.map((d) => <option key={d.id} value={d.id}>{d.name} v{d.version} · {d.kind}</option>)}
              </optgroup>
            )}
          </select>
        </label>
        <label className="flex flex-col">
          <span className="label">scorer</span>
          <select className="input" aria-label="scorer" value={scorer} onChange={(e) => onChange({ datasetId: chosen, scorer: e.target.value })}>
            <option value="">the latest job's</option>
            {scorerTypes().map((t) => <option key={t} value={t}>{t}</option>)}
          </select>
        </label>
        <Link to={`/training/new?${new URLSearchParams({ algorithm: 'eval', ...(chosen ? { dataset_id: chosen } : {}) })}`} className="btn-ghost ml-auto">
          New evaluation
        </Link>
      </div>
      {!chosen ? (
        <Empty
          title="No eval job has finished yet"
          next={<>A leaderboard ranks the models that eval jobs compared on one eval set. <Link to="/training/new?algorithm=eval" className="text-accent hover:underline">Evaluate a model against its base model →</Link></>}
        />
      ) : board.isLoading ? (
        <Loading what="the leaderboard" />
      ) : board.isError ? (
        <ErrorState error={board.error} what="the leaderboard" />
      ) : !board.data?.board ? (
        <Empty
          title="No leaderboard for this eval set"
          next={
            <div className="flex flex-col gap-2">
              <span data-testid="leaderboard-missing">{board.data?.missing}.</span>
              <Link to={`/training/new?${new URLSearchParams({ algorithm: 'eval', dataset_id: chosen })}`} className="text-accent hover:underline">
                Evaluate models on it →
              </Link>
            </div>
          }
        />
      ) : (
        <Board board={board.data.board} />
      )}
    </div>
  )
}

function Board({ board }: { board: { scorer: string; jobs: string[]; leaderboard: Record<string, unknown>[]; unranked: Record<string, unknown>[] } }) {
  const ranked = board.leaderboard as unknown as LeaderboardEntry[]
  const unranked = board.unranked as unknown as LeaderboardEntry[]
  return (
    <>
      <RatingsTable label="leaderboard" best jobs rows={ranked} />
      {unranked.length > 0 && (
        <p className="text-xs text-neutral-400">
          Evaluated but never compared with another model (not ranked):{' '}
          {unranked.map((m, i) => (
            <span key={m.key}>
              {i > 0 && ', '}
              {m.id ? <Link to={`/models/${m.id}`} className="text-accent hover:underline">{m.name}</Link> : <span className="font-mono">{m.name}</span>}
            </span>
          ))}
        </p>
      )}
      <p className="text-xs text-neutral-500" data-testid="leaderboard-basis">
        From {board.jobs.length} finished eval {board.jobs.length === 1 ? 'job' : 'jobs'} scored by <code className="text-accent">{board.scorer}</code>: a
        Bradley–Terry fit of every pairwise result (ties count half), on the Elo scale (1000 is the geometric mean; 400 points are 10:1 odds).
      </p>
    </>
  )
}
