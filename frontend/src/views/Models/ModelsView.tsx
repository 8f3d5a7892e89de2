// (being written)
export function ModelsView() {
  return <h1 className="text-2xl font-semibold">Models</h1>
}
