// An ended job's report: whether it learned (held-out metric against the base model), each
// warning with its likely cause and the setting to change, and a few held-out answers side by
// side with the base model's. The Playground is offered only to a model that learned.
import { Link } from 'react-router-dom'
import { reportOf, type JobReport, type ReportSample, type ReportWarning } from './contract'
import { useJobModels, type Job } from './queries'
import { formatMetric, verdictLine } from './report'

const TONE: Record<JobReport['verdict'], { border: string; text: string }> = {
  learned: { border: 'border-ok/50', text: 'text-ok' },
  not_learned: { border: 'border-bad/60', text: 'text-bad' },
  unknown: { border: 'border-warn/50', text: 'text-warn' },
}

const STAT_LABEL: Record<string, string> = {
  exact_match: 'exact match',
  mean_nll: 'mean NLL',
  empty_rate: 'empty answers',
  repeat_rate: 'repeated answers',
  reward: 'reward',
  accuracy: 'accuracy',
  win_rate: 'win rate',
}

const stat = (key: string, v: number | null | undefined) =>
  v === null || v === undefined ? '—' : key.endsWith('_rate') ? `${Math.round(v * 100)}%` : formatMetric(v)

export function ReportPanel({ job, onCheckpoints }: { job: Job; onCheckpoints: () => void }) {
  const report = reportOf(job)
  const models = useJobModels(job.id)
  const last = [...(models.data?.data ?? [])].sort((a, b) => b.step - a.step)[0]
  const library = job.state === 'succeeded' ? 'Every checkpoint is now a model in the library.' : null
  const actions = (
    <div className="flex flex-wrap gap-2">
      <button type="button" className="btn-ghost" onClick={onCheckpoints}>Checkpoints</button>
      <Link to={`/models?job_id=${job.id}`} className="btn-ghost">Open in Models</Link>
      {report?.verdict === 'learned' && last && (
        <Link to={`/playground?model=${encodeURIComponent(last.id)}`} className="btn-cta">Try it in the Playground</Link>
      )}
    </div>
  )
  if (!report) {
    if (job.state !== 'succeeded') return null
    return (
      <section className="card flex flex-wrap items-center justify-between gap-3 border-ink-600">
        <p className="text-sm text-neutral-300">
          <b className="text-neutral-100">Done.</b> {library} This job has no report (it ran before reports were written),
          so whether it learned is not known: compare the held-out metrics below, or its answers with the base model's.
        </p>
        {actions}
      </section>
    )
  }
  const tone = TONE[report.verdict] ?? TONE.unknown
  const stats = Object.keys(report.held_out).filter((k) => k !== 'num_samples' && typeof report.held_out[k] === 'number')
  return (
    <section aria-label="report" className={`card flex flex-col gap-4 ${tone.border}`}>
      <div className="flex flex-wrap items-start justify-between gap-3">
        <div>
          <h2 data-testid="verdict" className={`text-lg font-semibold ${tone.text}`}>{verdictLine(report)}</h2>
          <p className="mt-1 text-xs text-neutral-500">
            {typeof report.held_out.num_samples === 'number' && <>Measured on {report.held_out.num_samples} held-out rows the model never trained on. </>}
            {library}
          </p>
        </div>
        {actions}
      </div>
      {stats.length > 0 && (
        <dl className="flex flex-wrap gap-x-6 gap-y-1 text-xs">
          {stats.map((k) => (
            <div key={k}>
              <dt className="inline text-neutral-500">{STAT_LABEL[k] ?? k.replace(/_/g, ' ')}: </dt>
              <dd className="inline font-mono text-neutral-200">{stat(k, report.held_out[k])}</dd>
              <dd className="inline font-mono text-neutral-500"> (base {stat(k, report.base[k])})</dd>
            </div>
          ))}
        </dl>
      )}
      {report.warnings.length > 0 && <Warnings warnings={report.warnings} jobId={job.id} />}
      {report.samples.length > 0 && <Samples samples={report.samples.slice(0, 5)} />}
    </section>
  )
}

function Warnings({ warnings, jobId }: { warnings: ReportWarning[]; jobId: string }) {
  return (
    <div className="flex flex-col gap-2">
      <ul className="flex flex-col gap-2">
        {warnings.map((w) => (
          <li key={w.code + w.message} className="rounded-xl border border-warn/40 bg-warn/5 p-3 text-sm">
            <p className="font-medium text-warn"><span aria-hidden>⚠ </span>{w.message}</p>
            {w.cause && <p className="mt-1 text-neutral-300"><span className="text-neutral-500">Likely cause: </span>{w.cause}</p>}
            {w.fix && <p className="mt-1 text-neutral-300"><span className="text-neutral-500">Change: </span><span className="font-mono text-xs text-accent">{w.fix}</span></p>}
          </li>
        ))}
      </ul>
      <Link to={`/training/new?from_job=${jobId}`} className="btn-ghost self-start">Train again with these settings changed →</Link>
    </div>
  )
}

function Answer({ text }: { text: string }) {
  return text.trim() ? <>{text}</> : <span className="italic text-bad">(empty)</span>
}

function Samples({ samples }: { samples: ReportSample[] }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-ink-700">
      <table className="w-full text-left text-xs" aria-label="held-out samples">
        <thead className="bg-ink-800 uppercase tracking-wider text-neutral-500">
          <tr>
            <th className="px-3 py-2">Prompt</th>
            <th className="px-3 py-2">Reference</th>
            <th className="px-3 py-2">This model</th>
            <th className="px-3 py-2">Base model</th>
          </tr>
        </thead>
        <tbody className="font-mono">
          {samples.map((s, i) => (
            <tr key={i} className="border-t border-ink-700 align-top">
              <td className="max-w-xs whitespace-pre-wrap px-3 py-2 text-neutral-300">{s.prompt}</td>
              <td className="max-w-xs whitespace-pre-wrap px-3 py-2 text-neutral-400">{s.reference}</td>
              <td className="max-w-xs whitespace-pre-wrap px-3 py-2 text-neutral-100"><Answer text={s.answer} /></td>
              <td className="max-w-xs whitespace-pre-wrap px-3 py-2 text-neutral-400"><Answer text={s.base_answer} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
