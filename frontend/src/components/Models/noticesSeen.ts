// Which deployment notices this browser has seen: per deployment, the time of the latest event
// shown on its page (localStorage), so the badge on Models and on the Deployments tab counts
// only outcomes nobody has looked at yet.
import { create } from 'zustand'
import { persist } from 'zustand/middleware'
import { unseenNotices, type Notice } from './deployments'
import { useDeployments } from './queries'

interface SeenState {
  /** Deployment name → epoch seconds of the latest event seen. */
  seen: Record<string, number>
  markSeen: (name: string, at: number) => void
}

export const useNoticesSeen = create<SeenState>()(
  persist(
    (set) => ({
      seen: {},
      markSeen: (name, at) => set((s) => (s.seen[name] !== undefined && s.seen[name] >= at ? s : { seen: { ...s.seen, [name]: at } })),
    }),
    { name: 'thinker-deployment-notices-seen' },
  ),
)

/** The deployments' notices this browser has not seen (the list polled: useDeployments). */
export function useUnseenNotices(): Notice[] {
  const deployments = useDeployments()
  const seen = useNoticesSeen((s) => s.seen)
  return unseenNotices(deployments.data ?? [], seen)
}
