// The routes of the dashboard; each view lives in src/views/<View>/.
import { Navigate, Route, Routes } from 'react-router-dom'
import { Layout } from './components/Layout/Layout'
import { AnalyticsView } from './views/Analytics/AnalyticsView'
import { DatasetsView } from './views/Datasets/DatasetsView'
import { ModelsView } from './views/Models/ModelsView'
import { NotFoundPage } from './views/NotFoundPage'
import { PlaygroundView } from './views/Playground/PlaygroundView'
import { SettingsView } from './views/Settings/SettingsView'
import { TrainingView } from './views/Training/TrainingView'

export function App() {
  return (
    <Routes>
      <Route element={<Layout />}>
        <Route index element={<Navigate to="/training" replace />} />
        <Route path="training/*" element={<TrainingView />} />
        <Route path="models/*" element={<ModelsView />} />
        <Route path="datasets/*" element={<DatasetsView />} />
        <Route path="playground" element={<PlaygroundView />} />
        <Route path="analytics" element={<AnalyticsView />} />
        <Route path="settings" element={<SettingsView />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  )
}
