// The model library with its filters, states and the compare selection; the leaderboard of an
// eval set (`?view=leaderboard&dataset=ds_…&scorer=…`, so an eval job can link to it); and the
// deployments (`?view=deployments`, `&deploy=mdl_…` opening "New deployment" on a model), the
// tab marked with the count of their notices not seen yet.
import { useState, type ReactNode } from 'react'
import { Link, useSearchParams } from 'react-router-dom'
import { CompareBar } from '../../components/Models/CompareBar'
import { DeploymentsPanel } from '../../components/Models/DeploymentsPanel'
import { LeaderboardPanel } from '../../components/Models/Leaderboard'
import { ModelFilters } from '../../components/Models/ModelFilters'
import { ModelsTable } from '../../components/Models/ModelsTable'
import { NoticeBadge } from '../../components/Models/NoticeBadge'
import { useDatasetNames, useModels, type ModelFilter } from '../../components/Models/queries'
import { Empty, ErrorState, Loading } from '../../components/ui/States'
import { Tabs } from '../../components/ui/Tabs'

type View = 'library' | 'leaderboard' | 'deployments'
const VIEWS: { id: View; label: ReactNode }[] = [
  { id: 'library', label: 'Library' },
  { id: 'leaderboard', label: 'Leaderboard' },
  { id: 'deployments', label: <>Deployments<NoticeBadge /></> },
]
const ABOUT: Record<View, string> = {
  library: 'Every checkpoint a job saves becomes a model, with where it came from.',
  leaderboard: 'Which model is best on an eval set: every model its eval jobs compared, ranked by all their pairwise results.',
  deployments: 'Models served under a name to your apps, learning from their feedback behind an A/B gate.',
}

export function ModelListPage() {
  const [search, setSearch] = useSearchParams()
  const asked = search.get('view')
  const view: View = asked === 'leaderboard' || asked === 'deployments' ? asked : 'library'
  const choose = (params: Record<string, string>) => setSearch(Object.fromEntries(Object.entries(params).filter(([, v]) => v)), { replace: true })
  return (
    <div className="flex flex-col gap-4">
      <header className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <h1 className="text-2xl font-semibold text-neutral-100">Models</h1>
          <p className="mt-1 text-sm text-neutral-400">{ABOUT[view]}</p>
        </div>
      </header>
      <Tabs tabs={VIEWS} value={view} onChange={(v) => choose(v === 'library' ? {} : { view: v })} />
      {view === 'library' ? (
        <Library />
      ) : view === 'deployments' ? (
        <DeploymentsPanel deploy={search.get('deploy') ?? undefined} onDeployed={() => choose({ view })} />
      ) : (
        <LeaderboardPanel
          datasetId={search.get('dataset') ?? ''}
          scorer={search.get('scorer') ?? ''}
          onChange={({ datasetId, scorer }) => choose({ view: 'leaderboard', dataset: datasetId, scorer })}
        />
      )}
    </div>
  )
}

function Library() {
  const [filter, setFilter] = useState<ModelFilter>({})
  const [search, setSearch] = useState('')
  const [selected, setSelected] = useState<string[]>([])
  const models = useModels(filter)
  const all = useModels({})
  const datasetNames = useDatasetNames()
  const toggle = (id: string) => setSelected((s) => (s.includes(id) ? s.filter((x) => x !== id) : [...s, id].slice(-2)))
  const allModels = all.data?.data ?? []
  const baseModels = [...new Set(allModels.map((m) => m.base_model))]
  const datasets = [...new Set(allModels.flatMap((m) => (m.dataset_id ? [m.dataset_id] : [])))].map(
    (id): [string, string] => [id, datasetNames.get(id) ?? id],
  )
  const shown = (models.data?.data ?? []).filter((m) => m.name.toLowerCase().includes(search.toLowerCase()))
  const names = new Map(allModels.map((m) => [m.id, m.name]))
  return (
    <>
      {models.isPending ? (
        <Loading what="models" />
      ) : models.isError ? (
        <ErrorState error={models.error} what="models" />
      ) : allModels.length === 0 && !all.isPending ? (
        <Empty title="No models yet"
          next={<>A model appears here when a training job saves a checkpoint. <Link to="/training" className="text-accent hover:underline">Start a training job →</Link></>} />
      ) : (
        <>
          <ModelFilters filter={filter} onFilter={setFilter} search={search} onSearch={setSearch} baseModels={baseModels} datasets={datasets} />
          <CompareBar selected={selected} names={names} onClear={() => setSelected([])} />
          {shown.length === 0 ? (
            <Empty title="No model matches these filters" next={<button type="button" className="text-accent hover:underline" onClick={() => { setFilter({}); setSearch('') }}>Clear the filters</button>} />
          ) : (
            <ModelsTable models={shown} datasetNames={datasetNames} selected={selected} onToggle={toggle} />
          )}
          <p className="text-xs text-neutral-500">{shown.length} of {models.data.count} shown</p>
        </>
      )}
    </>
  )
}
