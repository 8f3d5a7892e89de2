// /datasets and its nested routes: the list, upload, Hugging Face import and one dataset.
import { Route, Routes } from 'react-router-dom'
import { NotFoundPage } from '../NotFoundPage'
import { DatasetListPage } from './DatasetListPage'
import { DatasetPage } from './DatasetPage'
import { ImportPage } from './ImportPage'
import { UploadPage } from './UploadPage'

export function DatasetsView() {
  return (
    <Routes>
      <Route index element={<DatasetListPage />} />
      <Route path="upload" element={<UploadPage />} />
      <Route path="import" element={<ImportPage />} />
      <Route path=":id" element={<DatasetPage />} />
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  )
}
