// (being written)
export function AnalyticsView() {
  return <h1 className="text-2xl font-semibold">Analytics</h1>
}
