// UI state that is not server state: the API token, onboarding, playground choices.
import { create } from 'zustand'
import { persist } from 'zustand/middleware'

interface UiState {
  token: string
  setToken: (token: string) => void
  tourDone: boolean
  setTourDone: (done: boolean) => void
  wizardSeen: boolean
  setWizardSeen: (seen: boolean) => void
}

export const useUiStore = create<UiState>()(
  persist(
    (set) => ({
      token: '',
      setToken: (token) => set({ token }),
      tourDone: false,
      setTourDone: (tourDone) => set({ tourDone }),
      wizardSeen: false,
      setWizardSeen: (wizardSeen) => set({ wizardSeen }),
    }),
    { name: 'thinker-ui' },
  ),
)
