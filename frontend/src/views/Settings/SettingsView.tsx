// Settings: the Tinker key, the server's configuration, API tokens and the onboarding tour.
import { useQuery } from '@tanstack/react-query'
import { api, unwrap } from '../../api/client'
import { ErrorState, Loading } from '../../components/ui/States'
import { ServerInfoCard } from './ServerInfoCard'
import { TinkerKeyCard } from './TinkerKeyCard'
import { TokensCard } from './TokensCard'
import { TourCard } from './TourCard'

export function SettingsView() {
  const settings = useQuery({ queryKey: ['settings'], queryFn: async () => unwrap(await api.GET('/api/settings')) })
  const health = useQuery({ queryKey: ['health'], queryFn: async () => unwrap(await api.GET('/api/health')) })
  return (
    <div className="mx-auto flex max-w-5xl flex-col gap-6">
      <header>
        <h1 className="text-2xl font-semibold text-neutral-100">Settings</h1>
        <p className="mt-1 text-sm text-neutral-400">Keys, tokens and what this server runs with.</p>
      </header>
      {settings.isPending ? (
        <Loading what="settings" />
      ) : settings.isError ? (
        <>
          <ErrorState error={settings.error} what="the settings" />
          {/* A 401 needs a token to recover from, and the token field lives in this card. */}
          <TokensCard authRequired />
        </>
      ) : (
        <>
          <div className="grid grid-cols-2 gap-6">
            <TinkerKeyCard isSet={settings.data.tinker_api_key_set} />
            <TourCard />
          </div>
          <TokensCard authRequired={settings.data.auth_required} />
          <ServerInfoCard settings={settings.data} health={health.data} />
        </>
      )}
    </div>
  )
}
