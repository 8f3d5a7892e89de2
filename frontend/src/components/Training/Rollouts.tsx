// An RL (or RLHF stage 3) job's rollout inspector: the step picker (following the latest step
// while the job runs) over the step's groups, as rollouts/RolloutInspector shows them.
import { useState } from 'react'
import { Empty, ErrorState, Loading } from '../ui/States'
import { useRollouts } from './queries'
import { RolloutInspector } from './rollouts/RolloutInspector'
import { StepPicker } from './rollouts/StepPicker'
import { parseGroups } from './rollouts/types'

const NONE_YET = 'Each RL step samples completions and writes them here; the first appear after step 1.'

export function Rollouts({ jobId, live }: { jobId: string; live: boolean }) {
  const [step, setStep] = useState<number | null>(null)
  const rollouts = useRollouts(jobId, step, live)
  if (rollouts.isLoading) return <Loading what="rollouts" />
  if (rollouts.isError) {
    return /no rollouts/i.test(String(rollouts.error))
      ? <Empty title="No rollouts yet" next={NONE_YET} />
      : <ErrorState error={rollouts.error} what="rollouts" />
  }
  const steps = rollouts.data?.steps ?? []
  const shown = rollouts.data?.step ?? null
  if (!steps.length || shown === null) return <Empty title="No rollouts yet" next={NONE_YET} />
  return (
    <div className={`flex flex-col gap-4 transition-opacity ${rollouts.isPlaceholderData ? 'opacity-60' : ''}`} aria-busy={rollouts.isPlaceholderData}>
      <div className="card p-3">
        <StepPicker steps={steps} shown={shown} live={live} following={step === null} onPick={setStep} />
      </div>
      <RolloutInspector groups={parseGroups(rollouts.data?.data ?? [])} step={shown} />
    </div>
  )
}
