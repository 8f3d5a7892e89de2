// Filters of the library: lifecycle, base model and dataset go to the server; the name
// search narrows the page already loaded.
import { LIFECYCLES, type Lifecycle, type ModelFilter } from './queries'

interface Props {
  filter: ModelFilter
  onFilter: (f: ModelFilter) => void
  search: string
  onSearch: (s: string) => void
  baseModels: string[]
  datasets: [string, string][]
}

export function ModelFilters({ filter, onFilter, search, onSearch, baseModels, datasets }: Props) {
  return (
    <div className="flex flex-wrap items-end gap-3">
      <label className="flex flex-col">
        <span className="label">search</span>
        <input className="input w-56" placeholder="model name…" value={search} onChange={(e) => onSearch(e.target.value)} />
      </label>
      <label className="flex flex-col">
        <span className="label">lifecycle</span>
        <select className="input" aria-label="filter lifecycle" value={filter.lifecycle ?? ''}
          onChange={(e) => onFilter({ ...filter, lifecycle: (e.target.value || undefined) as Lifecycle | undefined })}>
          <option value="">all</option>
          {LIFECYCLES.map((l) => <option key={l} value={l}>{l}</option>)}
        </select>
      </label>
      <label className="flex flex-col">
        <span className="label">base model</span>
        <select className="input" value={filter.base_model ?? ''} onChange={(e) => onFilter({ ...filter, base_model: e.target.value || undefined })}>
          <option value="">all</option>
          {baseModels.map((b) => <option key={b} value={b}>{b}</option>)}
        </select>
      </label>
      <label className="flex flex-col">
        <span className="label">dataset</span>
        <select className="input" value={filter.dataset_id ?? ''} onChange={(e) => onFilter({ ...filter, dataset_id: e.target.value || undefined })}>
          <option value="">all</option>
          {datasets.map(([id, name]) => <option key={id} value={id}>{name}</option>)}
        </select>
      </label>
    </div>
  )
}
