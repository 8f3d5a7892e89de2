// The forms against the server's OpenAPI document (openapi.json, read here as raw JSON): every
// setting they show is a field of its algorithm's (or RLHF stage's) config, its help is that
// field's description, and its empty state is the field's default or the server's proposal.
// A setting renamed or dropped on the server fails here once openapi.json is regenerated.
import { cleanup, render, screen } from '@testing-library/react'
import { afterEach, describe, expect, test } from 'vitest'
import openapi from '../../../openapi.json'
import { configSchema, datasetKinds, trainedBy, trains, type Algorithm, type RlhfStage } from '../../api/jobConfig'
import { DATASET_KINDS } from '../../api/vocabulary'
import { ALGORITHM_BY_ID, ALGORITHMS, FORM_ALGORITHMS, PARAMS, RLHF_STAGE_PARAMS, TRAINING_ALGORITHMS, WIZARD_PARAMS, type ParamSpec } from './algorithms'
import { ParamField } from './fields'

afterEach(cleanup)

type Json = Record<string, unknown>
const schemas = (openapi as unknown as { components: { schemas: Record<string, Json> } }).components.schemas
const named = (ref: unknown): Json => schemas[String(ref).split('/').pop() ?? '']

/** The config's fields of a POST /api/jobs body, walked by hand from JobCreate. */
function documented(algorithm: Algorithm, stage?: RlhfStage): Record<string, Json> {
  const mapping = (schemas.JobCreate.discriminator as { mapping: Record<string, string> }).mapping
  const body = named(mapping[algorithm]) as { properties: Record<string, Json> }
  let config = named(body.properties.config.$ref) as { properties: Record<string, Json> }
  if (stage) config = named(config.properties[stage].$ref) as { properties: Record<string, Json> }
  return config.properties
}

const FORMS: [string, Algorithm, RlhfStage | undefined, ParamSpec[]][] = [
  ...(['sl', 'dpo', 'rl', 'rlhf', 'rm', 'batch', 'eval', 'review'] as const).map((a) => [`new job, ${a}`, a, undefined, PARAMS[a]] as [string, Algorithm, undefined, ParamSpec[]]),
  ...(['sl', 'rm', 'rl'] as const).map((s) => [`new job, rlhf ${s} stage`, 'rlhf', s, RLHF_STAGE_PARAMS[s]] as [string, Algorithm, RlhfStage, ParamSpec[]]),
  ['wizard, sl', 'sl', undefined, WIZARD_PARAMS.supervised],
  ['wizard, dpo', 'dpo', undefined, WIZARD_PARAMS.supervised],
  ['wizard, rl', 'rl', undefined, WIZARD_PARAMS.rl],
  ['wizard, rlhf sl stage', 'rlhf', 'sl', WIZARD_PARAMS.supervised],
  ['wizard, rlhf rm stage', 'rlhf', 'rm', WIZARD_PARAMS.supervised],
  ['wizard, rlhf rl stage', 'rlhf', 'rl', WIZARD_PARAMS.rl],
]

describe('the forms show the settings the server documents', () => {
  test.each(FORMS)('%s: every key is a documented field', (_form, algorithm, stage, specs) => {
    const fields = documented(algorithm, stage)
    for (const spec of specs) expect(Object.keys(fields), spec.key).toContain(spec.key)
  })

  test.each(FORMS.slice(0, 11))('%s: the help is the description, empty is the default or the proposal', (_form, algorithm, stage, specs) => {
    const fields = documented(algorithm, stage)
    for (const spec of specs) {
      const field = fields[spec.key]
      render(<ParamField id={`f-${spec.key}`} spec={spec} schema={configSchema(algorithm, stage)} value="" onChange={() => {}} />)
      const tip = screen.getByRole('tooltip')
      expect(tip.textContent?.startsWith(String(field.description)), spec.key).toBe(true)
      expect(field.description, spec.key).toBeTruthy()
      const empty = field['x-proposed'] ? 'proposed by the server' : `default: ${JSON.stringify(field.default ?? null)}`
      const input = screen.queryByRole('textbox')
      if (input) expect(input).toHaveAttribute('placeholder', empty)
      else expect(screen.getByRole('combobox')).toHaveDisplayValue(empty)
      if (field['x-proposed']) expect(field).not.toHaveProperty('default')
      cleanup()
    }
  })
})

describe('dataset kinds come from the document', () => {
  test('each algorithm and RLHF stage takes the kinds its dataset_id documents', () => {
    const mapping = (schemas.JobCreate.discriminator as { mapping: Record<string, string> }).mapping
    for (const algorithm of ['sl', 'dpo', 'rl', 'rlhf', 'rm', 'batch', 'eval', 'review'] as const) {
      const body = named(mapping[algorithm]) as { properties: Record<string, Json> }
      expect(datasetKinds(algorithm)).toEqual(body.properties.dataset_id['x-dataset-kinds'])
    }
    for (const stage of ['rm', 'rl'] as const) {
      expect(datasetKinds('rlhf', stage)).toEqual(documented('rlhf', stage).dataset_id['x-dataset-kinds'])
    }
    expect(DATASET_KINDS).toEqual(schemas.DatasetKind.enum)
  })

  test('every kind of dataset trains something, of the DatasetKind enum only', () => {
    for (const kind of DATASET_KINDS) expect(trainedBy(kind), kind).not.toEqual([])
    for (const algorithm of ['sl', 'dpo', 'rl', 'rlhf'] as const) {
      for (const kind of datasetKinds(algorithm)) expect(DATASET_KINDS).toContain(kind)
    }
  })
})

describe('what trains', () => {
  test('the algorithms the server proposes for train (rm, a reward model, too); batch, eval and review do not', () => {
    expect(TRAINING_ALGORITHMS).toEqual(['sl', 'dpo', 'rl', 'rlhf', 'rm'])
    for (const algorithm of ['batch', 'eval', 'review'] as const) expect(trains(algorithm), algorithm).toBe(false)
    const mapping = (schemas.JobProposalRequest.discriminator as { mapping: Record<string, string> }).mapping
    expect(Object.keys(mapping).sort()).toEqual([...TRAINING_ALGORITHMS].sort())
  })

  test('every algorithm a job may run is described; the new-job form offers all but review', () => {
    const mapping = (schemas.JobCreate.discriminator as { mapping: Record<string, string> }).mapping
    expect(ALGORITHMS.map((a) => a.id).sort()).toEqual(Object.keys(mapping).sort())
    expect(FORM_ALGORITHMS.map((a) => a.id)).toEqual(['sl', 'dpo', 'rl', 'rlhf', 'rm', 'batch', 'eval'])
    expect(ALGORITHM_BY_ID.rm.short).toBe('RM')
    expect(ALGORITHM_BY_ID.review.short).toBe('Review')
  })
})
