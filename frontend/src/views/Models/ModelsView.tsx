// /models and its nested routes: the library and one model.
import { Route, Routes } from 'react-router-dom'
import { NotFoundPage } from '../NotFoundPage'
import { ModelListPage } from './ModelListPage'
import { ModelPage } from './ModelPage'

export function ModelsView() {
  return (
    <Routes>
      <Route index element={<ModelListPage />} />
      <Route path=":id" element={<ModelPage />} />
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  )
}
