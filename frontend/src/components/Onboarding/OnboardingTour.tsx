// The first-visit tour: popovers pointing at the nav items (their data-tour attributes), one
// view at a time. Skipping or finishing sets tourDone; Settings sets it back to restart.
import { useEffect, useLayoutEffect, useState } from 'react'
import { useNavigate } from 'react-router-dom'
import { useUiStore } from '../../state/ui'
import { TOUR_STEPS, type TourStep } from './steps'

export function OnboardingTour() {
  const { tourDone, setTourDone } = useUiStore()
  // Remounted on each restart, so a restarted tour begins at its first step.
  return tourDone ? null : <Tour steps={TOUR_STEPS} onDone={() => setTourDone(true)} />
}

function useTargetRect(target: string | undefined): DOMRect | null {
  const [rect, setRect] = useState<DOMRect | null>(null)
  useLayoutEffect(() => {
    const measure = () => {
      const el = target ? document.querySelector(`[data-tour="${target}"]`) : null
      setRect(el ? el.getBoundingClientRect() : null)
    }
    measure()
    window.addEventListener('resize', measure)
    return () => window.removeEventListener('resize', measure)
  }, [target])
  return rect
}

function Tour({ steps, onDone }: { steps: TourStep[]; onDone: () => void }) {
  const [index, setIndex] = useState(0)
  const navigate = useNavigate()
  const step = steps[index]
  const last = index === steps.length - 1
  const rect = useTargetRect(step.target)
  const next = () => (last ? onDone() : setIndex(index + 1))
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onDone()
      if (e.key === 'ArrowRight') setIndex((i) => Math.min(i + 1, steps.length - 1))
      if (e.key === 'ArrowLeft') setIndex((i) => Math.max(i - 1, 0))
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [onDone, steps.length])

  // Beside the highlighted nav item when there is one, else centred.
  const place = rect
    ? { left: rect.right + 20, top: Math.max(16, Math.min(rect.top - 24, window.innerHeight - 260)) }
    : { left: '50%', top: '50%', transform: 'translate(-50%, -50%)' }
  return (
    <div className="fixed inset-0 z-50" aria-live="polite">
      {rect ? (
        // The spotlight: a ring around the target whose huge shadow dims everything else.
        <div className="pointer-events-none fixed rounded-xl ring-2 ring-accent transition-all duration-200"
          style={{ left: rect.left - 4, top: rect.top - 4, width: rect.width + 8, height: rect.height + 8,
            boxShadow: '0 0 0 9999px rgba(0,0,0,0.6), 0 0 24px rgba(14,165,233,0.6)' }} />
      ) : (
        <div className="fixed inset-0 bg-black/60 backdrop-blur-[2px]" />
      )}
      <div role="dialog" aria-label="Onboarding tour" className="card fixed w-[340px] shadow-[0_0_40px_rgba(14,165,233,0.25)]" style={place}>
        {rect && <span className="absolute -left-2 top-8 h-4 w-4 rotate-45 border-b border-l border-ink-700 bg-ink-900" aria-hidden />}
        <div className="mb-2 flex items-center gap-2 text-xs uppercase tracking-wider text-neutral-500">
          <span className="led bg-accent shadow-[0_0_8px_#0ea5e9]" /> Step {index + 1} of {steps.length}
        </div>
        <h3 className="text-lg font-semibold text-neutral-100">{step.title}</h3>
        <p className="mt-2 text-sm leading-relaxed text-neutral-300">{step.body}</p>
        <div className="mt-5 flex items-center gap-2">
          {!last && <button className="text-xs text-neutral-500 hover:text-neutral-200" onClick={onDone}>Skip tour</button>}
          {index > 0 && <button className="btn-ghost ml-auto px-3 py-1.5" onClick={() => setIndex(index - 1)}>Back</button>}
          {last ? (
            <button className="btn-cta ml-auto px-3 py-1.5" onClick={() => { onDone(); navigate('/training') }}>Start training</button>
          ) : (
            <button className={`btn-cta px-3 py-1.5 ${index === 0 ? 'ml-auto' : ''}`} onClick={next}>{index === 0 ? 'Show me around' : 'Next'}</button>
          )}
        </div>
      </div>
    </div>
  )
}
