// One problem's group: its prompt and reference, then the completions shown under the filter,
// each with reward, advantage, version and truncation, and opening into its episode.
import { Fragment, useState } from 'react'
import { formatValue } from '../../../lib/metrics'
import type { ColourMode } from './colour'
import { EpisodeView } from './EpisodeView'
import type { ShownGroup } from './filters'

const tone = (v: number) => (v > 0 ? 'text-ok' : v < 0 ? 'text-bad' : 'text-neutral-500')

export function GroupCard({ shown, mode }: { shown: ShownGroup; mode: ColourMode }) {
  const { group, index, rows } = shown
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set())
  const toggle = (row: number) => setOpen((s) => (s.has(row) ? new Set([...s].filter((r) => r !== row)) : new Set([...s, row])))
  return (
    <article className={`card p-4 ${group.dropped ? 'border-dashed' : ''}`} aria-label={`Group ${index + 1}`} data-testid="rollout-group">
      <header className="mb-2 flex flex-wrap items-baseline justify-between gap-2">
        <h4 className="text-sm text-neutral-400">
          Group {index + 1}
          {group.dropped && <span className="ml-2 rounded bg-ink-700 px-1.5 py-0.5 text-xs text-warn">dropped: not trained</span>}
          {rows.length < group.completions.length && (
            <span className="ml-2 text-xs text-neutral-500">{rows.length} of {group.completions.length} completions shown</span>
          )}
        </h4>
        {group.answer && <span className="text-xs text-neutral-500">reference answer <code className="text-cta">{group.answer}</code></span>}
      </header>
      <p className="mb-3 whitespace-pre-wrap rounded-lg bg-ink-950 p-2 font-mono text-xs text-neutral-200">{group.prompt}</p>
      <table className="w-full text-xs">
        <thead className="text-left text-neutral-500">
          <tr>
            <th className="w-8 py-1">#</th><th className="py-1">Completion</th>
            <th className="w-16 py-1 text-right">Version</th><th className="w-20 py-1 text-right">Reward</th><th className="w-24 py-1 text-right">Advantage</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((i) => {
            const episode = group.episodes?.[i] ?? null
            const c = group.completions[i]
            return (
              <Fragment key={i}>
                <tr className="border-t border-ink-800 align-top" data-testid="completion">
                  <td className="py-1 font-mono text-neutral-500">{i + 1}</td>
                  <td className="py-1 pr-2">
                    {episode ? (
                      <button type="button" className="w-full text-left hover:text-accent" aria-expanded={open.has(i)} onClick={() => toggle(i)}>
                        <span className="mr-1 text-neutral-500">{open.has(i) ? '▾' : '▸'}</span>
                        {episode.truncated && <span className="mr-1 rounded bg-warn/15 px-1 text-warn">truncated</span>}
                        <span className="font-mono whitespace-pre-wrap break-all text-neutral-300">{c || <i className="text-neutral-600">(empty)</i>}</span>
                      </button>
                    ) : (
                      <span className="font-mono whitespace-pre-wrap break-all text-neutral-300">{c || <i className="text-neutral-600">(empty)</i>}</span>
                    )}
                  </td>
                  <td className="py-1 text-right font-mono text-neutral-500">{episode?.version ?? '—'}</td>
                  <td className="py-1 text-right font-mono">{formatValue(group.rewards[i])}</td>
                  <td className={`py-1 text-right font-mono ${tone(group.advantages[i] ?? 0)}`}>{formatValue(group.advantages[i])}</td>
                </tr>
                {episode && open.has(i) && (
                  <tr>
                    <td colSpan={5} className="pb-3 pt-1"><EpisodeView episode={episode} mode={mode} /></td>
                  </tr>
                )}
              </Fragment>
            )
          })}
        </tbody>
      </table>
    </article>
  )
}
