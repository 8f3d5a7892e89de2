// (being written)
export function DatasetsView() {
  return <h1 className="text-2xl font-semibold">Datasets</h1>
}
