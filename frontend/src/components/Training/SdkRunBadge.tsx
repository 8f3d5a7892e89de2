// The "Tinker SDK" badge of a Tinker SDK client's run (sdkRun.ts), naming its model and token.
import type { Job } from './queries'

export function SdkRunBadge({ job }: { job: Job }) {
  const model = (job.config as Record<string, unknown>).model_id
  const title = `Trained by a Tinker SDK client over this server's Tinker API${typeof model === 'string' ? ` (model ${model})` : ''}${job.created_by ? `, token "${job.created_by}"` : ''}`
  return (
    <span data-testid="sdk-badge" title={title} className="rounded bg-cta/15 px-1.5 py-0.5 text-[11px] font-medium text-cta">
      Tinker SDK
    </span>
  )
}
