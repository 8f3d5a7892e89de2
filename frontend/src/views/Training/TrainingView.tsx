// The Training view owns its nested routes: the job list, a job, the new-job form, the wizard.
import { Route, Routes } from 'react-router-dom'
import { NotFoundPage } from '../NotFoundPage'
import { JobListPage } from './JobListPage'
import { JobPage } from './JobPage'
import { NewJobPage } from './NewJobPage'
import { WizardPage } from './WizardPage'

export function TrainingView() {
  return (
    <Routes>
      <Route index element={<JobListPage />} />
      <Route path="new" element={<NewJobPage />} />
      <Route path="wizard" element={<WizardPage />} />
      <Route path=":jobId" element={<JobPage />} />
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  )
}
