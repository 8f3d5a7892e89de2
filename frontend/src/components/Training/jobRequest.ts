// From the new-job form's fields to a POST /api/jobs body. Number fields arrive as text;
// an empty field is left out so the server's default applies. The JSON editor's object is
// merged last (deeply, so {"rl": {"max_tokens": 12}} keeps the form's other rl keys).
import type { Schemas } from '../../api/client'
import { PARAMS, RLHF_STAGE_PARAMS, type Algorithm, type ParamSpec } from './algorithms'

export type Fields = Record<string, string>

export interface FormState {
  name: string
  algorithm: Algorithm
  backend: 'local' | 'tinker'
  baseModel: string
  datasetId: string
  /** RLHF: the preference pairs and the RL prompts. */
  rmDatasetId: string
  rlDatasetId: string
  params: Fields
  /** RLHF stage fields, keyed "sl.learning_rate" etc. */
  stageParams: Fields
  extraJson: string
}

export function defaultFields(specs: readonly ParamSpec[], prefix = ''): Fields {
  return Object.fromEntries(specs.map((p) => [prefix + p.key, p.default === null ? '' : String(p.default)]))
}

export function initialForm(algorithm: Algorithm = 'sl'): FormState {
  return {
    name: '',
    algorithm,
    backend: 'local',
    baseModel: 'thinker/tiny',
    datasetId: '',
    rmDatasetId: '',
    rlDatasetId: '',
    params: defaultFields(PARAMS[algorithm]),
    stageParams: {
      ...defaultFields(RLHF_STAGE_PARAMS.sl, 'sl.'),
      ...defaultFields(RLHF_STAGE_PARAMS.rm, 'rm.'),
      ...defaultFields(RLHF_STAGE_PARAMS.rl, 'rl.'),
    },
    extraJson: '{}',
  }
}

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

export function deepMerge(a: Json, b: Json): Json {
  const out: Json = { ...a }
  for (const [k, v] of Object.entries(b)) out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Json, v) : v
  return out
}

function values(specs: readonly ParamSpec[], fields: Fields, prefix: string, where: string, problems: string[]): Json {
  const out: Json = {}
  for (const p of specs) {
    const raw = (fields[prefix + p.key] ?? '').trim()
    if (raw === '') continue
    if (p.type === 'select') out[p.key] = raw
    else if (Number.isFinite(Number(raw))) out[p.key] = Number(raw)
    else problems.push(`${where}${p.key}: "${raw}" is not a number`)
  }
  return out
}

/** The request body, or the problems found before asking the server. */
export function buildJobRequest(f: FormState): { body: Schemas['JobCreate'] | null; problems: string[] } {
  const problems: string[] = []
  let extra: Json = {}
  try {
    const parsed: unknown = JSON.parse(f.extraJson.trim() || '{}')
    if (isObject(parsed)) extra = parsed
    else problems.push('other settings: must be a JSON object, like {"seed": 1}')
  } catch (e) {
    problems.push(`other settings: invalid JSON (${(e as Error).message})`)
  }
  let config = values(PARAMS[f.algorithm], f.params, '', 'config.', problems)
  if (f.algorithm === 'rlhf') {
    const stage = (s: 'sl' | 'rm' | 'rl') => values(RLHF_STAGE_PARAMS[s], f.stageParams, `${s}.`, `config.${s}.`, problems)
    config = {
      ...config,
      sl: stage('sl'),
      rm: { ...(f.rmDatasetId ? { dataset_id: f.rmDatasetId } : {}), ...stage('rm') },
      rl: { ...(f.rlDatasetId ? { dataset_id: f.rlDatasetId } : {}), ...stage('rl') },
    }
  }
  config = deepMerge(config, extra)
  if (!f.baseModel.trim()) problems.push('base_model: required')
  if (problems.length) return { body: null, problems }
  return {
    body: {
      algorithm: f.algorithm,
      backend: f.backend,
      base_model: f.baseModel.trim(),
      dataset_id: f.datasetId || null,
      priority: 0,
      ...(f.name.trim() ? { name: f.name.trim() } : {}),
      config,
    },
    problems,
  }
}
