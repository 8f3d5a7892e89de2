// (being written)
export function SettingsView() {
  return <h1 className="text-2xl font-semibold">Settings</h1>
}
