import { describe, expect, test } from 'vitest'
import { configSchema } from '../../api/jobConfig'
import { batchKey, batchLimit, checkNumber, parseNumber, ruleOf } from './validate'

// SL's config as the server's OpenAPI document has it.
const SL = configSchema('sl')

describe('rules from the schema', () => {
  test('integer, number, nullable and bounds, from plain and anyOf properties', () => {
    expect(ruleOf(SL, 'batch_size')).toEqual({ type: 'integer', nullable: false, exclusiveMinimum: 0, minimum: undefined, maximum: 1_000_000, exclusiveMaximum: undefined })
    expect(ruleOf(SL, 'max_steps')).toMatchObject({ type: 'integer', nullable: true, exclusiveMinimum: 0 })
    expect(ruleOf(SL, 'eval_fraction')).toMatchObject({ type: 'number', minimum: 0, exclusiveMaximum: 1 })
  })

  test('a text field or an unknown key has no numeric rule', () => {
    expect(ruleOf(SL, 'lr_schedule')).toBeNull()
    expect(ruleOf(SL, 'nosuch')).toBeNull()
    expect(ruleOf(undefined, 'batch_size')).toBeNull()
  })

  test('RL batches are prompts per step', () => {
    expect(batchKey('rl')).toBe('groups_per_batch')
    expect(batchKey('dpo')).toBe('batch_size')
  })
})

describe('a field as typed', () => {
  const rule = (key: string) => ruleOf(SL, key)

  test('text that is not a plain number is refused, not read as something else', () => {
    expect(checkNumber('abc', rule('learning_rate'))).toBe('"abc" is not a number.')
    expect(checkNumber('0x10', rule('batch_size'))).toBe('"0x10" is not a number.')
    expect(checkNumber('1e', rule('learning_rate'))).toBe('"1e" is not a number.')
    expect(parseNumber(' 3e-4 ')).toBe(3e-4)
    expect(parseNumber('.5')).toBe(0.5)
    expect(parseNumber('Infinity')).toBeNull()
  })

  test('the schema bounds: gt 0, ge 0, lt 1, integers', () => {
    expect(checkNumber('-0.01', rule('learning_rate'))).toBe('Must be greater than 0.')
    expect(checkNumber('0', rule('num_epochs'))).toBe('Must be greater than 0.')
    expect(checkNumber('2.5', rule('num_epochs'))).toBe('Must be a whole number.')
    // eval_every allows 0 ("only at the end"): the schema says ge 0, so 0 is sent as 0.
    expect(checkNumber('0', rule('eval_every'))).toBeNull()
    expect(checkNumber('-1', rule('eval_every'))).toBe('Must be at least 0.')
    expect(checkNumber('1', rule('eval_fraction'))).toBe('Must be less than 1.')
    expect(checkNumber('3e-4', rule('learning_rate'))).toBeNull()
  })

  test('a batch no larger than the training rows', () => {
    expect(checkNumber('100000', rule('batch_size'), { limit: batchLimit(90) })).toBe('Larger than the 90 training rows: at most 90.')
    expect(checkNumber('90', rule('batch_size'), { limit: batchLimit(90) })).toBeNull()
    expect(batchLimit(undefined)).toBeUndefined()
  })

  test('empty: left to the server, unless the field is required and not nullable', () => {
    expect(checkNumber('', rule('batch_size'))).toBeNull()
    expect(checkNumber(' ', rule('batch_size'), { required: true })).toBe('Enter a value.')
    expect(checkNumber('', rule('max_steps'), { required: true })).toBeNull()
  })
})
