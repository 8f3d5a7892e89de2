// (being written)
export function TrainingView() {
  return <h1 className="text-2xl font-semibold">Training</h1>
}
