// The last dataset lineage each kind of feedback went to, so the next save defaults to it; and
// the very last one saved to, so "Learn from this" defaults to the feedback just given.
import { create } from 'zustand'
import { persist } from 'zustand/middleware'
import type { FeedbackKind } from './feedback'

export interface LastTarget {
  kind: FeedbackKind
  root: string
}

interface TargetState {
  roots: Partial<Record<FeedbackKind, string>>
  last: LastTarget | null
  remember: (kind: FeedbackKind, rootId: string) => void
}

export const useFeedbackTarget = create<TargetState>()(
  persist(
    (set) => ({
      roots: {},
      last: null,
      remember: (kind, rootId) => set((s) => ({ roots: { ...s.roots, [kind]: rootId }, last: { kind, root: rootId } })),
    }),
    { name: 'thinker-feedback-target' },
  ),
)
