// Picks two models for the playground's side-by-side comparison.
import { useNavigate } from 'react-router-dom'

export function CompareBar({ selected, names, onClear }: { selected: string[]; names: Map<string, string>; onClear: () => void }) {
  const navigate = useNavigate()
  const [a, b] = selected
  return (
    <div className="flex flex-wrap items-center gap-3 rounded-xl border border-ink-700 bg-ink-900 px-4 py-2 text-sm">
      <span className="label mb-0">compare</span>
      {selected.length === 0 ? (
        <span className="text-neutral-500">tick two models to compare them side by side in the playground</span>
      ) : (
        <span className="text-neutral-200">
          {selected.map((id) => names.get(id) ?? id).join('  vs  ')}
          {selected.length === 1 && <span className="text-neutral-500"> — pick one more</span>}
        </span>
      )}
      <span className="ml-auto flex gap-2">
        {selected.length > 0 && <button type="button" className="btn-ghost px-3 py-1" onClick={onClear}>Clear</button>}
        <button type="button" className="btn-cta px-3 py-1" disabled={selected.length !== 2}
          onClick={() => navigate(`/playground?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`)}>
          Compare
        </button>
      </span>
    </div>
  )
}
