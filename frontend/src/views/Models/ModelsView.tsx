// /models and its nested routes: the library (with its leaderboard and deployments tabs), one
// model, one deployment.
import { Route, Routes } from 'react-router-dom'
import { NotFoundPage } from '../NotFoundPage'
import { DeploymentPage } from './DeploymentPage'
import { ModelListPage } from './ModelListPage'
import { ModelPage } from './ModelPage'

export function ModelsView() {
  return (
    <Routes>
      <Route index element={<ModelListPage />} />
      <Route path="deployments/:name" element={<DeploymentPage />} />
      <Route path=":id" element={<ModelPage />} />
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  )
}
