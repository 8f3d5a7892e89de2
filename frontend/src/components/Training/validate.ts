// Numeric fields checked as typed, by the server's own rules (the config schemas of its
// OpenAPI document, api/jobConfig.ts) and the one rule a schema cannot hold: a batch no larger
// than the rows left for training. Nothing is corrected here: a value is either sent as
// shown or refused with a message.
import type { ConfigSchema, PropertySchema, Stage } from '../../api/jobConfig'

export interface FieldRule {
  type: 'integer' | 'number'
  /** The schema allows null (e.g. max_steps: derived); an empty field is then fine. */
  nullable: boolean
  minimum?: number
  exclusiveMinimum?: number
  maximum?: number
  exclusiveMaximum?: number
}

/** The numeric rule of `key` in a config schema, or null when it is not a numeric field. */
export function ruleOf(schema: ConfigSchema | undefined, key: string): FieldRule | null {
  const prop = schema?.properties?.[key]
  if (!prop) return null
  const options: PropertySchema[] = prop.anyOf ?? [prop]
  const numeric = options.find((o) => o.type === 'integer' || o.type === 'number')
  if (!numeric) return null
  const bounds = { ...prop, ...numeric }
  return {
    type: numeric.type as FieldRule['type'],
    nullable: options.some((o) => o.type === 'null'),
    minimum: bounds.minimum,
    exclusiveMinimum: bounds.exclusiveMinimum,
    maximum: bounds.maximum,
    exclusiveMaximum: bounds.exclusiveMaximum,
  }
}

/** The field that must fit the training rows: examples (or pairs) per step, or prompts per step. */
export function batchKey(stage: Stage): 'batch_size' | 'groups_per_batch' {
  return stage === 'rl' ? 'groups_per_batch' : 'batch_size'
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/

/** The number a field holds, or null when the text is not a plain decimal number. */
export function parseNumber(raw: string): number | null {
  const text = raw.trim()
  if (!DECIMAL.test(text)) return null
  const n = Number(text)
  return Number.isFinite(n) ? n : null
}

export interface CheckOptions {
  /** Empty text is an error ("enter a value") rather than "leave it to the server". */
  required?: boolean
  /** The most this field may be, and why (the training rows). */
  limit?: { max: number; why: string }
}

/** Why `raw` cannot be sent for a field with `rule`, or null when it can (empty included,
 * unless required: an empty field is left out of the request). */
export function checkNumber(raw: string, rule: FieldRule | null, options: CheckOptions = {}): string | null {
  const text = raw.trim()
  if (text === '') return options.required && !rule?.nullable ? 'Enter a value.' : null
  const n = parseNumber(text)
  if (n === null) return `"${text}" is not a number.`
  if (rule?.type === 'integer' && !Number.isInteger(n)) return 'Must be a whole number.'
  if (rule?.exclusiveMinimum !== undefined && !(n > rule.exclusiveMinimum)) return `Must be greater than ${rule.exclusiveMinimum}.`
  if (rule?.minimum !== undefined && n < rule.minimum) return `Must be at least ${rule.minimum}.`
  if (rule?.exclusiveMaximum !== undefined && !(n < rule.exclusiveMaximum)) return `Must be less than ${rule.exclusiveMaximum}.`
  if (rule?.maximum !== undefined && n > rule.maximum) return `Must be at most ${rule.maximum}.`
  if (options.limit && n > options.limit.max) return `Larger than ${options.limit.why}: at most ${options.limit.max}.`
  return null
}

/** The limit of a stage's batch field: its training rows. */
export function batchLimit(trainRows: number | undefined): CheckOptions['limit'] {
  return trainRows === undefined ? undefined : { max: trainRows, why: `the ${trainRows} training rows` }
}
