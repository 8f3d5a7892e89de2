// (being written)
export function PlaygroundView() {
  return <h1 className="text-2xl font-semibold">Playground</h1>
}
