// The rendered preview of a stored dataset, a page at a time.
import { useState } from 'react'
import { Empty, Loading } from '../ui/States'
import { usePreview, type RenderOptions } from './queries'
import { RenderedRow, SegmentLegend } from './Segments'

const PAGE = 5

export function PreviewPanel({ id, options }: { id: string; options: RenderOptions }) {
  const [offset, setOffset] = useState(0)
  const preview = usePreview(id, options, offset, PAGE)
  if (preview.isPending) return <Loading what="preview" />
  if (preview.isError) return <RenderError error={preview.error} />
  const { rendered, total } = preview.data
  if (total === 0) return <Empty title="No rows" next="This dataset holds no rows to render." />
  return (
    <div className="flex flex-col gap-3">
      <div className="flex flex-wrap items-center justify-between gap-3">
        <SegmentLegend />
        <span className="text-xs text-neutral-500">
          {preview.data.base_model} · {preview.data.renderer} · {preview.data.train_on_what} · max {preview.data.max_length}
        </span>
      </div>
      {rendered.map((row) => <RenderedRow key={row.line} row={row} />)}
      <div className="flex items-center gap-3 text-sm">
        <button type="button" className="btn-ghost px-3 py-1" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
          ← previous
        </button>
        <span className="text-neutral-400">
          rows {offset + 1}–{Math.min(offset + PAGE, total)} of {total.toLocaleString()}
        </span>
        <button type="button" className="btn-ghost px-3 py-1" disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>
          next →
        </button>
      </div>
    </div>
  )
}

/** A 422 here is a bad option (unknown renderer or base model): say which control to change. */
export function RenderError({ error }: { error: unknown }) {
  return (
    <div role="alert" className="rounded-xl border border-bad/50 bg-bad/5 p-4 text-sm">
      <div className="font-semibold text-bad">Could not render with these options</div>
      <p className="mt-1 text-neutral-300">{error instanceof Error ? error.message : String(error)}</p>
      <p className="mt-1 text-xs text-neutral-500">Change the base model, renderer or train-on setting above and render again.</p>
    </div>
  )
}
