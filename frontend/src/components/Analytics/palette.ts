// One colour per selected run, the same in the chart, the tables and the picker.
export const RUN_COLORS = ['#0ea5e9', '#14b8a6', '#f59e0b', '#a855f7', '#ec4899', '#22c55e', '#ef4444', '#eab308']

export function runColor(index: number): string {
  return RUN_COLORS[index % RUN_COLORS.length]
}
