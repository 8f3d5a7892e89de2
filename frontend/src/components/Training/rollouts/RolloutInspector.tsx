// The rollouts of one step: summary, histograms, filters, the colour scale of the token view,
// and the groups. Pure of the network: Rollouts (../Rollouts.tsx) loads the step and picks it.
import { useState } from 'react'
import { formatValue } from '../../../lib/metrics'
import { Empty } from '../../ui/States'
import type { ColourMode } from './colour'
import { ColourLegend } from './ColourLegend'
import { FilterBar } from './FilterBar'
import { applyFilter, type RolloutFilter } from './filters'
import { GroupCard } from './GroupCard'
import { StepHistograms } from './Histograms'
import { mean, stepNumbers, type StepNumbers } from './stats'
import type { RolloutGroup } from './types'

function Summary({ groups, numbers }: { groups: readonly RolloutGroup[]; numbers: StepNumbers }) {
  const { versions } = numbers
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`
  const parts = [
    count(groups.length, 'prompt'),
    count(numbers.completions, 'completion'),
    `mean reward ${formatValue(mean(numbers.rewards))}`,
    `${groups.filter((g) => g.dropped).length} dropped`,
    ...(groups.some((g) => g.episodes) ? [`${numbers.truncated} truncated`] : []),
    ...(numbers.gaps.length ? [`mean gap ${formatValue(mean(numbers.gaps))}`] : []),
    ...(versions.length ? [`sampled from version ${versions.length > 1 ? `${versions[0]}–${versions.at(-1)}` : versions[0]}`] : []),
  ]
  return (
    <p className="text-xs text-neutral-500" data-testid="rollouts-summary">
      {parts.join(' · ')} · advantage = reward − the group's mean
    </p>
  )
}

/** `step` keys the groups: a new step closes the episodes opened in the last, and keeps the
 * filter and colour mode. */
export function RolloutInspector({ groups, step }: { groups: readonly RolloutGroup[]; step: number }) {
  const [filter, setFilter] = useState<RolloutFilter>('all')
  const [mode, setMode] = useState<ColourMode>('logprob')
  const numbers = stepNumbers(groups)
  const shown = applyFilter(groups, filter)
  const hasEpisodes = groups.some((g) => g.episodes)
  return (
    <div className="flex flex-col gap-4">
      <Summary groups={groups} numbers={numbers} />
      <StepHistograms numbers={numbers} />
      <div className="card flex flex-col gap-3 p-3">
        <FilterBar groups={groups} value={filter} onChange={setFilter} />
        {hasEpisodes ? (
          <ColourLegend mode={mode} onChange={setMode} />
        ) : (
          <p className="text-xs text-neutral-500">This run recorded no episodes (it predates them): no turns or token logprobs to show.</p>
        )}
      </div>
      {shown.length === 0 ? (
        <Empty title="No group matches this filter" next="Pick another filter, or All, to see every group of the step." />
      ) : (
        <div className="flex flex-col gap-3">
          {shown.map((s) => <GroupCard key={`${step}-${filter}-${s.index}`} shown={s} mode={mode} />)}
        </div>
      )}
    </div>
  )
}
