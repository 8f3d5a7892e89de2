// A job's settings as the server documents them: the typed config of each algorithm (and of
// each RLHF stage) in the OpenAPI document (openapi.json, generated from the server), with
// each field's help, default or proposal, choices and bounds, and the dataset kinds each one
// trains on. The forms read these; nothing here is a copy of the server's.
import { components } from '../../openapi.json'
import type { Schemas } from './client'
import type { DatasetKind } from './vocabulary'

export type Algorithm = Schemas['JobCreate']['algorithm']
/** An algorithm that trains a model: the server proposes its settings from the data. */
export type TrainingAlgorithm = Schemas['JobProposalRequest']['algorithm']
export type RlhfStage = 'sl' | 'rm' | 'rl'
/** A stage of a job's proposal: its algorithm's, or an RLHF stage. */
export type Stage = Schemas['StageProposalPublic']['stage']

export const RLHF_STAGES: readonly RlhfStage[] = ['sl', 'rm', 'rl']

/** One property of a JSON Schema, as far as the forms read it. */
export interface PropertySchema {
  $ref?: string
  type?: string
  anyOf?: PropertySchema[]
  enum?: unknown[]
  const?: unknown
  minimum?: number
  exclusiveMinimum?: number
  maximum?: number
  exclusiveMaximum?: number
  /** A list's longest length. */
  maxItems?: number
  default?: unknown
  description?: string
  /** Left out of a request, the server proposes it from the data. */
  'x-proposed'?: boolean
  /** A dataset id: the kinds of dataset it may name. */
  'x-dataset-kinds'?: DatasetKind[]
}

/** An object schema: a config, or a request body. */
export interface ConfigSchema {
  properties: Record<string, PropertySchema>
  description?: string
}

const SCHEMAS = components.schemas as unknown as Record<string, PropertySchema & ConfigSchema & { discriminator?: { mapping: Record<string, string> } }>

/** The schema a `$ref` names, or `schema` itself. */
function resolve(schema: PropertySchema): PropertySchema & ConfigSchema {
  const target = schema.$ref ? SCHEMAS[schema.$ref.split('/').pop() ?? ''] : undefined
  return target ?? (schema as PropertySchema & ConfigSchema)
}

/** Whether `algorithm` trains a model, its settings proposed from the data (POST
 * /api/jobs/proposal takes it): the policies' algorithms and rm, a reward model. Batch answers,
 * evaluations and reviews train nothing (Training/evaluation.ts, trainsNothing). */
export function trains(algorithm: Algorithm): algorithm is TrainingAlgorithm {
  return algorithm in (SCHEMAS.JobProposalRequest.discriminator?.mapping ?? {})
}

/** The POST /api/jobs body of an algorithm. */
export function bodySchema(algorithm: Algorithm): ConfigSchema {
  return resolve({ $ref: SCHEMAS.JobCreate.discriminator?.mapping[algorithm] })
}

/** The config of a job of `algorithm`; for RLHF with `stage`, that stage's section. */
export function configSchema(algorithm: Algorithm, stage?: RlhfStage): ConfigSchema {
  const config = resolve(bodySchema(algorithm).properties.config)
  return stage ? resolve(config.properties[stage]) : config
}

/** The object schema a setting of `schema` holds (an eval job's `scorer`), or null when the
 * setting is not an object of its own. */
export function subSchema(schema: ConfigSchema, key: string): ConfigSchema | null {
  const prop = schema.properties[key]
  const target = prop ? resolve(prop) : null
  return target?.properties ? target : null
}

/** The config that holds a proposal stage's settings: the algorithm's, or its RLHF stage's. */
export function stageSchema(algorithm: Algorithm, stage: Stage): ConfigSchema {
  return algorithm === 'rlhf' ? configSchema('rlhf', stage as RlhfStage) : configSchema(algorithm)
}

/** The kinds of dataset an algorithm trains on (RLHF: its SL stage's; `stage`: that stage's). */
export function datasetKinds(algorithm: Algorithm, stage?: Exclude<RlhfStage, 'sl'>): DatasetKind[] {
  const holder = stage ? configSchema('rlhf', stage) : bodySchema(algorithm)
  return holder.properties.dataset_id['x-dataset-kinds'] ?? []
}

/** What trains on a dataset of `kind`: SL, DPO, RM (RLHF's judge), RL. */
export function trainedBy(kind: DatasetKind): string[] {
  const users: [string, DatasetKind[]][] = [
    ['SL', datasetKinds('sl')],
    ['DPO', datasetKinds('dpo')],
    ['RM', datasetKinds('rlhf', 'rm')],
    ['RL', datasetKinds('rl')],
  ]
  return users.filter(([, kinds]) => kinds.includes(kind)).map(([name]) => name)
}

/** One setting as a form shows it. */
export interface ConfigField {
  key: string
  /** The server's help for it. */
  description: string
  /** Left out, the server proposes it from the data (see POST /api/jobs/proposal). */
  proposed: boolean
  /** Its default when not proposed (null when the document shows none: FastAPI leaves
   * null defaults out). */
  default: unknown
  /** The values it takes, when it is a choice. */
  options: string[] | null
  /** Free text (a string that is not a choice), sent as typed. */
  text: boolean
  schema: PropertySchema
}

/** The field `key` of a config schema, or null when the schema has no such field. */
export function configField(schema: ConfigSchema, key: string): ConfigField | null {
  const prop = schema.properties[key]
  if (!prop) return null
  const choice = resolve(prop).enum ?? null
  const text = !choice && (prop.anyOf ?? [prop]).some((o) => o.type === 'string' && o.const === undefined && !o.enum)
  return {
    key,
    description: prop.description ?? '',
    proposed: prop['x-proposed'] === true,
    default: prop.default ?? null,
    options: choice ? choice.map(String) : null,
    text,
    schema: prop,
  }
}
