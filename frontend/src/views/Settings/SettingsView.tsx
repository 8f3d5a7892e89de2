// Settings: the stored API keys, the server's configuration, API tokens and the onboarding tour.
import { useQuery } from '@tanstack/react-query'
import { api, unwrap } from '../../api/client'
import { ErrorState, Loading } from '../../components/ui/States'
import { ServerInfoCard } from './ServerInfoCard'
import { ApiKeyCard } from './ApiKeyCard'
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
            <ApiKeyCard which="tinker" isSet={settings.data.tinker_api_key_set}>
              Needed only for jobs on the Tinker backend and for sampling models trained there. The server keeps it in its
              data directory (mode 0600) and never sends it back.
            </ApiKeyCard>
            <TourCard />
            <ApiKeyCard which="judge" isSet={settings.data.judge_api_key_set} endpoint={settings.data.judge_url}>
              For eval jobs whose scorer is a model as judge at an OpenAI-compatible endpoint (llm_judge with a judge
              endpoint): sent as the bearer token to the endpoint it is stored for, to no other. Kept like the Tinker
              key, never sent back.
            </ApiKeyCard>
          </div>
          <TokensCard authRequired={settings.data.auth_required} />
          <ServerInfoCard settings={settings.data} health={health.data} />
        </>
      )}
    </div>
  )
}
