// A job's attempts, when it had more than one or one was interrupted: where each ran, how it
// ended (with the reason of an interruption or a failure) and how the next one came, by the
// server's auto-resume or by a person. Built from the job's state and placement events
// (attempts.ts); read only for a job that may have such a history.
import { isActive } from '../../api/vocabulary'
import { Section } from '../ui/Section'
import { ErrorState } from '../ui/States'
import { StatusLed } from '../ui/Status'
import { afterText, attemptsFromEvents, autoResumeText, mayHaveAttempts, placementText, placementTitle, showAttempts, type Attempt } from './attempts'
import { useJobHistory, type Job } from './queries'

function Ended({ attempt, job, last }: { attempt: Attempt; job: Job; last: boolean }) {
  const end = attempt.end
  if (!end) return last && isActive(job.state) ? <StatusLed state={job.state} /> : <span className="text-neutral-500">—</span>
  return (
    <div className="flex flex-col gap-1">
      <StatusLed state={end.state} />
      {end.reason && <span className="whitespace-pre-wrap text-neutral-300">{end.reason}</span>}
      {end.logTail && (
        <details>
          <summary className="cursor-pointer text-neutral-500 hover:text-accent">last log lines</summary>
          <pre className="mt-1 max-h-48 overflow-auto rounded-xl bg-ink-950 p-2 font-mono text-neutral-300">{end.logTail}</pre>
        </details>
      )}
    </div>
  )
}

export function AttemptsPanel({ job }: { job: Job }) {
  const history = useJobHistory(job.id, mayHaveAttempts(job))
  if (history.isError) return job.attempts > 1 ? <ErrorState error={history.error} what="the job's attempts" /> : null
  const attempts = attemptsFromEvents(history.data?.events ?? [])
  if (!showAttempts(attempts)) return null
  const count = Math.max(job.attempts, attempts.length)
  return (
    <Section
      title="Attempts"
      aside={
        <p data-testid="attempts-summary" className="text-xs text-neutral-400">
          {count} {count === 1 ? 'attempt' : 'attempts'} · {autoResumeText(job)}
          <span className="text-neutral-500"> — a lost worker or node resumes from the last checkpoint by itself while retries last.</span>
        </p>
      }
    >
      <div className="overflow-x-auto rounded-xl border border-ink-700">
        <table className="w-full text-left text-xs" aria-label="attempts">
          <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
            <tr>
              <th className="px-3 py-2">Attempt</th>
              <th className="px-3 py-2">Ran on</th>
              <th className="px-3 py-2">Started</th>
              <th className="px-3 py-2">How it ended</th>
              <th className="px-3 py-2">Then</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a, i) => {
              const then = afterText(a)
              return (
                <tr key={a.attempt} data-testid={`attempt-${a.attempt}`} className="border-t border-ink-700 align-top">
                  <td className="px-3 py-2 font-mono text-neutral-200">#{a.attempt}</td>
                  <td className="px-3 py-2 font-mono text-neutral-300" title={a.placement ? placementTitle(a.placement) : undefined}>
                    {a.placement ? placementText(a.placement) : (a.device ?? <span className="text-neutral-500">—</span>)}
                  </td>
                  <td className="whitespace-nowrap px-3 py-2 text-neutral-400">{a.startedAt ? new Date(a.startedAt * 1000).toLocaleString() : '—'}</td>
                  <td className="max-w-md px-3 py-2"><Ended attempt={a} job={job} last={i === attempts.length - 1} /></td>
                  <td className={`px-3 py-2 ${a.resumed?.kind === 'auto' ? 'text-warn' : 'text-neutral-300'}`}>{then ?? <span className="text-neutral-500">—</span>}</td>
                </tr>
              )
            })}
          </tbody>
        </table>
      </div>
    </Section>
  )
}
