// The field mapping as editable rows and back: blank rows are kept while editing, dropped when sent.
import type { Mapping } from './http'

export interface MappingRow {
  canonical: string
  source: string
}

export function rowsFromMapping(mapping: Mapping): MappingRow[] {
  return Object.entries(mapping).map(([canonical, source]) => ({ canonical, source }))
}

export function mappingFromRows(rows: MappingRow[]): Mapping {
  const mapping: Mapping = {}
  for (const row of rows) {
    if (row.canonical.trim() && row.source.trim()) mapping[row.canonical.trim()] = row.source.trim()
  }
  return mapping
}

