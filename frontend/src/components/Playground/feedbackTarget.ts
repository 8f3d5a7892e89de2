// The last dataset lineage each kind of feedback went to, so the next save defaults to it.
import { create } from 'zustand'
import { persist } from 'zustand/middleware'
import type { FeedbackKind } from './feedback'

interface TargetState {
  roots: Partial<Record<FeedbackKind, string>>
  remember: (kind: FeedbackKind, rootId: string) => void
}

export const useFeedbackTarget = create<TargetState>()(
  persist(
    (set) => ({
      roots: {},
      remember: (kind, rootId) => set((s) => ({ roots: { ...s.roots, [kind]: rootId } })),
    }),
    { name: 'thinker-feedback-target' },
  ),
)
