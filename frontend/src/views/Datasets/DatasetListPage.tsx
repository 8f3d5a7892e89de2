// The dataset list with its three states, and the two ways to add data.
import { useState } from 'react'
import { Link } from 'react-router-dom'
import { DATASET_KINDS } from '../../api/vocabulary'
import { DatasetTable } from '../../components/Datasets/DatasetTable'
import { KIND_LABEL } from '../../components/Datasets/format'
import { useDatasets } from '../../components/Datasets/queries'
import { Empty, ErrorState, Loading } from '../../components/ui/States'
import { PageHeader } from './PageHeader'

export function DatasetListPage() {
  const datasets = useDatasets()
  const [kind, setKind] = useState('')
  const shown = (datasets.data?.data ?? []).filter((d) => !kind || d.kind === kind)
  return (
    <div>
      <PageHeader title="Datasets" sub="Every dataset is checked row by row before it is stored; jobs train on one version.">
        <Link to="/datasets/import" className="btn-ghost">Import from Hugging Face</Link>
        <Link to="/datasets/upload" className="btn-cta">Upload a dataset</Link>
      </PageHeader>
      {datasets.isPending ? (
        <Loading what="datasets" />
      ) : datasets.isError ? (
        <ErrorState error={datasets.error} what="datasets" />
      ) : datasets.data.data.length === 0 ? (
        <Empty
          title="No datasets yet"
          next={<>Upload a JSONL, JSON, CSV or Parquet file — it is validated and previewed before anything is stored. <Link to="/datasets/upload" className="text-accent hover:underline">Upload one →</Link></>}
        />
      ) : (
        <div className="flex flex-col gap-3">
          <div className="flex items-center gap-2 text-sm">
            <span className="label mb-0">kind</span>
            {(['', ...DATASET_KINDS] as const).map((k) => (
              <button key={k} type="button" onClick={() => setKind(k)}
                className={`rounded-full px-3 py-1 text-xs ${kind === k ? 'bg-accent/15 text-accent ring-1 ring-accent/40' : 'text-neutral-400 hover:text-neutral-100'}`}>
                {k ? KIND_LABEL[k] : 'all'}
              </button>
            ))}
            <span className="ml-auto text-xs text-neutral-500">{shown.length} of {datasets.data.count}</span>
          </div>
          <DatasetTable datasets={shown} />
        </div>
      )}
    </div>
  )
}
