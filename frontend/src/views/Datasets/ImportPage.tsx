import { ImportPanel } from '../../components/Datasets/ImportPanel'
import { PageHeader } from './PageHeader'

export function ImportPage() {
  return (
    <div className="max-w-5xl">
      <PageHeader back title="Import from Hugging Face"
        sub="A hub id (org/name) or a directory in the server's import folder. Rows are streamed, mapped and checked like an upload." />
      <ImportPanel />
    </div>
  )
}
