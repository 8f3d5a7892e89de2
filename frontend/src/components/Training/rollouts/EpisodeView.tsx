// One completion opened into its episode: version, truncation and gap, then turn by turn.
import { formatValue } from '../../../lib/metrics'
import { Chip } from '../../ui/Chip'
import type { ColourMode } from './colour'
import { meanGap } from './stats'
import { TurnView } from './TurnView'
import type { Episode } from './types'

export function EpisodeView({ episode, mode }: { episode: Episode; mode: ColourMode }) {
  const g = meanGap(episode)
  const turns = episode.turns.length ? episode.turns : [{ role: 'assistant', content: '', tool_call: null, error: null }]
  return (
    <div className="flex flex-col gap-2" data-testid="episode">
      <div className="flex flex-wrap items-center gap-2 text-xs">
        <span data-testid="episode-version"><Chip tone="accent">version {episode.version ?? '—'}</Chip></span>
        {episode.truncated ? <Chip tone="warn">truncated: hit the token or turn budget</Chip> : <Chip>not truncated</Chip>}
        <Chip>{episode.tokens.length} tokens · {episode.turns.filter((t) => t.role === 'assistant').length} policy turns</Chip>
        <Chip tone={g === null ? 'neutral' : 'cta'}>mean gap {g === null ? '— (not trained)' : formatValue(g)}</Chip>
      </div>
      <ol className="flex flex-col gap-2">
        {turns.map((t, i) => (
          <TurnView key={i} turn={t} index={i} mode={mode} tokens={episode.tokens.filter((k) => k.turn === i)} />
        ))}
      </ol>
    </div>
  )
}
