import { UploadPanel } from '../../components/Datasets/UploadPanel'
import { PageHeader } from './PageHeader'

export function UploadPage() {
  return (
    <div className="max-w-5xl">
      <PageHeader back title="Upload a dataset" sub="Detect → confirm the mapping → validate → store. Nothing is stored until the last step." />
      <UploadPanel />
    </div>
  )
}
