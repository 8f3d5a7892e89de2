// Configs side by side: nested settings flattened to dotted keys ("rm.beta"), so two runs
// compare key by key and a difference deep inside a stage still shows.

export type Flat = Record<string, string>

function show(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return value
  return JSON.stringify(value)
}

export function flatten(value: Record<string, unknown>, prefix = ''): Flat {
  const out: Flat = {}
  for (const [key, inner] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${key}` : key
    if (inner !== null && typeof inner === 'object' && !Array.isArray(inner)) {
      Object.assign(out, flatten(inner as Record<string, unknown>, path))
    } else if (inner !== undefined) {
      out[path] = show(inner)
    }
  }
  return out
}

export interface DiffRow {
  key: string
  /** One per config, in order; undefined where that config does not set the key. */
  values: (string | undefined)[]
  differs: boolean
}

/** Every key any config sets, sorted, with whether the configs disagree on it. */
export function diffConfigs(configs: Record<string, unknown>[]): DiffRow[] {
  const flats = configs.map((c) => flatten(c))
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))].sort()
  return keys.map((key) => {
    const values = flats.map((f) => f[key])
    return { key, values, differs: new Set(values).size > 1 }
  })
}
