// One rendered row as training sees it: trained text highlighted, the rest dim, and text
// past max_length struck through (it never reaches the model).
import type { Schemas } from '../../api/client'

type Row = Schemas['PreviewRow']
type Segment = Schemas['Segment']

function segmentClass(segment: Segment): string {
  if (segment.truncated) return 'line-through decoration-bad/70 text-neutral-600'
  return segment.trained ? 'bg-cta/15 text-cta rounded-sm' : 'text-neutral-500'
}

export function RenderedRow({ row }: { row: Row }) {
  return (
    <article className="rounded-xl border border-ink-700 bg-ink-950/60 p-4" aria-label={`line ${row.line}`}>
      <header className="mb-2 flex flex-wrap items-center gap-3 text-xs text-neutral-500">
        <span className="font-mono text-neutral-300">line {row.line}</span>
        <span>{row.num_tokens} tokens</span>
        <span className={row.num_trained_tokens === 0 ? 'text-bad' : 'text-cta'}>{row.num_trained_tokens} trained</span>
        {row.truncated && <span className="text-warn">truncated</span>}
      </header>
      {row.error ? (
        <p className="text-sm text-bad">{row.error}</p>
      ) : (
        (row.sequences ?? []).map((seq) => (
          <div key={seq.name} className="mb-2 last:mb-0">
            {(row.sequences?.length ?? 0) > 1 && (
              <div className="mb-1 text-[10px] uppercase tracking-wider text-accent">{seq.name}</div>
            )}
            <pre className="whitespace-pre-wrap break-words font-mono text-sm leading-relaxed">
              {seq.segments.map((segment, i) => (
                <span key={i} data-trained={segment.trained} data-truncated={segment.truncated} className={segmentClass(segment)}>
                  {segment.text}
                </span>
              ))}
            </pre>
          </div>
        ))
      )}
    </article>
  )
}

export function SegmentLegend() {
  return (
    <div className="flex flex-wrap gap-4 text-xs text-neutral-400">
      <span><span className="rounded-sm bg-cta/15 px-1 font-mono text-cta">trained</span> the loss is computed here</span>
      <span><span className="font-mono text-neutral-500">context</span> seen, not trained</span>
      <span><span className="font-mono text-neutral-600 line-through decoration-bad/70">cut</span> past max_length</span>
    </div>
  )
}
