// Small formatters shared by the dataset and model screens.
import type { DatasetKind } from '../../api/vocabulary'

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  const units = ['KiB', 'MiB', 'GiB']
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit += 1
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`
}

/** A date as the server sends it (ISO text, or Unix seconds for models). */
export function formatDate(value: string | number): string {
  const date = typeof value === 'number' ? new Date(value * 1000) : new Date(value)
  if (Number.isNaN(date.getTime())) return String(value)
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })
}

export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString()
  // Learning rates and the like: 5e-5 reads better than 0.00005000.
  if (value !== 0 && Math.abs(value) < 1e-3) return value.toExponential(2)
  return Math.abs(value) >= 100 ? value.toFixed(1) : value.toPrecision(4)
}

export const KIND_LABEL: Record<DatasetKind, string> = {
  chat: 'chat',
  prompt_completion: 'prompt / completion',
  preferences: 'preferences',
  problems: 'RL problems',
}
