// "4, 7-9" → [4, 7, 8, 9]: how people write line numbers; null when the text is not that.
export function parseLines(text: string): number[] | null {
  const lines = new Set<number>()
  for (const part of text.split(/[\s,]+/).filter(Boolean)) {
    const range = /^(\d+)(?:-(\d+))?$/.exec(part)
    if (!range) return null
    const lo = Number(range[1])
    const hi = range[2] ? Number(range[2]) : lo
    if (lo < 1 || hi < lo || hi - lo > 100_000) return null
    for (let n = lo; n <= hi; n++) lines.add(n)
  }
  return [...lines].sort((a, b) => a - b)
}
