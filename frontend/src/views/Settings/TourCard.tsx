// Restarting the onboarding tour: it shows again as soon as tourDone is false.
import { useUiStore } from '../../state/ui'

export function TourCard() {
  const { tourDone, setTourDone } = useUiStore()
  return (
    <section className="card flex flex-col gap-3">
      <h2 className="font-semibold text-neutral-100">Onboarding tour</h2>
      <p className="text-sm text-neutral-400">
        A one-minute walk through the views: where to add data, train, try and compare models.
      </p>
      <button className="btn-ghost self-start" onClick={() => setTourDone(false)} disabled={!tourDone}>
        {tourDone ? 'Restart the tour' : 'Tour in progress'}
      </button>
    </section>
  )
}
