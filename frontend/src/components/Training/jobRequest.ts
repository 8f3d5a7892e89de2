// From the new-job form's fields to a POST /api/jobs body. Number fields arrive as text;
// an empty field is left out so the server's proposal (for batch and eval, the default)
// applies. The JSON editor's object is merged last (deeply, so {"rl": {"max_tokens": 12}} keeps
// the form's other rl keys). An eval job's models and scorer have fields of their own.
import type { Schemas } from '../../api/client'
import { bodySchema, configField, configSchema, RLHF_STAGES, subSchema, trains, type ConfigSchema, type RlhfStage, type Stage } from '../../api/jobConfig'
import { FORM_ALGORITHMS, PARAMS, RLHF_STAGE_PARAMS, type Algorithm, type ParamSpec } from './algorithms'
import type { JobProposal, ProposalRequest } from './contract'
import type { Job } from './queries'
import { batchKey, batchLimit, checkNumber, ruleOf } from './validate'

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
  /** Times the job resumes by itself when its worker or node is lost (request's auto_resume). */
  autoResume: string
  /** Processes that train the job data-parallel, one GPU each (request's gpus). */
  gpus: string
  /** eval: the models compared with the baseline (library ids or base models), in order. */
  evalModels: string[]
  /** eval: the scorer's type, and its pattern (regex), its function (python) or its reward
   * model (reward_model: a library model of an RLHF job's rm stage, or weights). */
  scorer: string
  scorerPattern: string
  scorerFunction: string
  scorerRewardModel: string
  /** llm_judge: the judge model, and the OpenAI-compatible endpoint's URL when it is external. */
  scorerJudgeModel: string
  scorerJudgeUrl: string
}

/** An eval job's scorers, from the server's schema (EvalScorer.type). */
export function scorerTypes(): string[] {
  const scorer = subSchema(configSchema('eval'), 'scorer')
  return (scorer && configField(scorer, 'type')?.options) ?? []
}

/** How many models an eval job compares with its baseline at most (config.models' maxItems). */
export function maxEvalModels(): number {
  return configField(configSchema('eval'), 'models')?.schema.maxItems ?? 7
}

/** The request's own auto_resume field: its default and bounds, from the server's schema. */
const autoResumeField = (algorithm: Algorithm) => configField(bodySchema(algorithm), 'auto_resume')

/** Why the auto-resume field cannot be sent, or null (empty: the server's default). */
export function autoResumeError(f: Pick<FormState, 'algorithm' | 'autoResume'>): string | null {
  return checkNumber(f.autoResume, ruleOf(bodySchema(f.algorithm), 'auto_resume'))
}

/** The request's own gpus field: its default and bounds, from the server's schema. */
const gpusField = (algorithm: Algorithm) => configField(bodySchema(algorithm), 'gpus')

/** Only these use several GPUs, and only on the local backend: sl, dpo and rl train
 * data-parallel, a batch job spreads its actors over them. */
const MULTI_GPU: readonly Algorithm[] = ['sl', 'dpo', 'rl', 'batch']

/** Why the GPUs field cannot be sent, or null (empty: the server's default, one process). */
export function gpusError(f: Pick<FormState, 'algorithm' | 'backend' | 'gpus'>): string | null {
  const error = checkNumber(f.gpus, ruleOf(bodySchema(f.algorithm), 'gpus'))
  if (error) return error
  const n = f.gpus.trim() === '' ? 1 : Number(f.gpus.trim())
  if (n > 1 && (f.backend !== 'local' || !MULTI_GPU.includes(f.algorithm))) return 'Only local sl, dpo, rl and batch jobs use several GPUs.'
  return null
}

/** Every hyperparameter starts empty: the server proposes it from the data. */
export function initialForm(algorithm: Algorithm = 'sl'): FormState {
  return {
    name: '',
    algorithm,
    backend: 'local',
    baseModel: 'thinker/tiny',
    datasetId: '',
    rmDatasetId: '',
    rlDatasetId: '',
    params: {},
    stageParams: {},
    extraJson: '{}',
    autoResume: text(autoResumeField(algorithm)?.default) ?? '',
    gpus: text(gpusField(algorithm)?.default) ?? '',
    evalModels: [],
    scorer: 'exact_match',
    scorerPattern: '',
    scorerFunction: '',
    scorerRewardModel: '',
    scorerJudgeModel: '',
    scorerJudgeUrl: '',
  }
}

/** The algorithms a link may open the form with (a review starts from a reward model's page). */
const ALGORITHM_IDS: readonly Algorithm[] = FORM_ALGORITHMS.map((a) => a.id)

/** A new form from a link's query: `?algorithm=eval&models=mdl_a,mdl_b&base_model=…&backend=…`
 * (a model's "Evaluate" button), `?algorithm=rm&base_model=mdl_…` (a reward model's "Retrain");
 * what the query does not say is as a blank form has it. */
export function formFromSearch(search: URLSearchParams): FormState {
  const asked = search.get('algorithm') as Algorithm | null
  const form = initialForm(asked && ALGORITHM_IDS.includes(asked) ? asked : 'sl')
  const backend = search.get('backend')
  if (backend === 'local' || backend === 'tinker') form.backend = backend
  const baseModel = search.get('base_model')?.trim()
  if (baseModel) form.baseModel = baseModel
  else if (form.backend === 'tinker') form.baseModel = ''
  const models = (search.get('models') ?? '').split(',').map((m) => m.trim()).filter(Boolean)
  form.evalModels = [...new Set(models)].filter((m) => m !== form.baseModel).slice(0, maxEvalModels())
  const dataset = search.get('dataset_id')
  if (dataset) form.datasetId = dataset
  return form
}

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const text = (v: unknown): string | null => (typeof v === 'number' || typeof v === 'string' ? String(v) : null)

export function deepMerge(a: Json, b: Json): Json {
  const out: Json = { ...a }
  for (const [k, v] of Object.entries(b)) out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Json, v) : v
  return out
}

function values(schema: ConfigSchema, specs: readonly ParamSpec[], fields: Fields, prefix: string, where: string, problems: string[]): Json {
  const out: Json = {}
  for (const p of specs) {
    const raw = (fields[prefix + p.key] ?? '').trim()
    if (raw === '') continue
    const field = configField(schema, p.key)
    if (field?.options || field?.text) out[p.key] = raw
    else if (Number.isFinite(Number(raw))) out[p.key] = Number(raw)
    else problems.push(`${where}${p.key}: "${raw}" is not a number`)
  }
  return out
}

/** The request body, or the problems found before asking the server. (Typed loosely: the
 * server takes every setting as optional, while the generated types call each field with a
 * default required, as is right for what the server sends.) */
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
  let config = values(configSchema(f.algorithm), PARAMS[f.algorithm], f.params, '', 'config.', problems)
  if (f.algorithm === 'rlhf') {
    const stage = (s: RlhfStage) => values(configSchema('rlhf', s), RLHF_STAGE_PARAMS[s], f.stageParams, `${s}.`, `config.${s}.`, problems)
    config = {
      ...config,
      sl: stage('sl'),
      rm: { ...(f.rmDatasetId ? { dataset_id: f.rmDatasetId } : {}), ...stage('rm') },
      rl: { ...(f.rlDatasetId ? { dataset_id: f.rlDatasetId } : {}), ...stage('rl') },
    }
  }
  if (f.algorithm === 'eval') config = { ...config, ...evalSection(f, problems) }
  config = deepMerge(config, extra)
  if (!f.baseModel.trim()) problems.push('base_model: required')
  if (f.algorithm === 'eval') problems.push(...evalModelProblems(f.baseModel.trim(), config.models))
  const autoResume = autoResumeError(f)
  if (autoResume) problems.push(`auto_resume: ${autoResume}`)
  const gpus = gpusError(f)
  if (gpus) problems.push(`gpus: ${gpus}`)
  if (problems.length) return { body: null, problems }
  const body = {
    algorithm: f.algorithm,
    backend: f.backend,
    base_model: f.baseModel.trim(),
    dataset_id: f.datasetId || null,
    priority: 0,
    ...(f.gpus.trim() ? { gpus: Number(f.gpus.trim()) } : {}),
    ...(f.autoResume.trim() ? { auto_resume: Number(f.autoResume.trim()) } : {}),
    ...(f.name.trim() ? { name: f.name.trim() } : {}),
    config,
  }
  return { body: body as Schemas['JobCreate'], problems }
}

/** An eval job's models and scorer, as the form holds them. */
function evalSection(f: FormState, problems: string[]): Json {
  const scorer: Json = { type: f.scorer }
  if (f.scorer === 'regex') {
    if (f.scorerPattern.trim()) scorer.pattern = f.scorerPattern
    else problems.push('config.scorer.pattern: a regex scorer needs a pattern')
  }
  if (f.scorer === 'python') {
    if (/^[\w.]+:\w+$/.test(f.scorerFunction.trim())) scorer.function = f.scorerFunction.trim()
    else problems.push('config.scorer.function: a python scorer needs its function, as "module:function"')
  }
  if (f.scorer === 'reward_model') {
    if (f.scorerRewardModel.trim()) scorer.reward_model = f.scorerRewardModel.trim()
    else problems.push('config.scorer.reward_model: a reward_model scorer needs its reward model (mdl_… of an RLHF job\'s rm stage)')
  }
  if (f.scorer === 'llm_judge') {
    if (f.scorerJudgeModel.trim()) scorer.judge_model = f.scorerJudgeModel.trim()
    else problems.push('config.scorer.judge_model: an llm_judge scorer needs its judge model')
    if (f.scorerJudgeUrl.trim()) scorer.judge_url = f.scorerJudgeUrl.trim()
  }
  return { models: f.evalModels, scorer }
}

/** Why an eval job's models (after the JSON editor's) cannot be sent: none to compare, the
 * baseline among them, one twice. */
function evalModelProblems(baseline: string, models: unknown): string[] {
  if (!Array.isArray(models) || models.length === 0) return ['config.models: choose at least one model to compare with the baseline']
  const refs = models.map((m) => (typeof m === 'string' ? m : String((m as Json | null)?.name ?? (m as Json | null)?.model ?? '')))
  if (refs.includes(baseline)) return [`config.models: ${baseline} is the baseline already; compare it with other models`]
  const twice = refs.filter((r, i) => refs.indexOf(r) !== i)
  return twice.length ? [`config.models: ${twice[0]} is chosen twice`] : []
}

/** Where each field's rules are: its config schema, and the stage whose training rows bound it
 * (none for RLHF's own keys, such as lora_rank). */
function fieldStages(f: FormState): { schema: ConfigSchema; specs: readonly ParamSpec[]; prefix: string; stage: Stage | null; fields: Fields }[] {
  if (f.algorithm !== 'rlhf') {
    // batch and eval train nothing: no stage, no training rows to bound a field
    const stage = trains(f.algorithm) ? f.algorithm : null
    return [{ schema: configSchema(f.algorithm), specs: PARAMS[f.algorithm], prefix: '', stage, fields: f.params }]
  }
  return [
    { schema: configSchema('rlhf'), specs: PARAMS.rlhf, prefix: '', stage: null, fields: f.params },
    ...RLHF_STAGES.map((s) => ({ schema: configSchema('rlhf', s), specs: RLHF_STAGE_PARAMS[s], prefix: `${s}.`, stage: s, fields: f.stageParams })),
  ]
}

/** Each invalid number field's message, keyed as the form keys it ("batch_size", "rl.max_steps"). */
export function formErrors(f: FormState, proposal: JobProposal | undefined): Record<string, string> {
  const errors: Record<string, string> = {}
  for (const { schema, specs, prefix, stage, fields } of fieldStages(f)) {
    const rows = proposal?.stages.find((s) => s.stage === stage)?.train_rows
    for (const p of specs) {
      const rule = ruleOf(schema, p.key)
      if (!rule) continue
      const limit = stage !== null && p.key === batchKey(stage) ? batchLimit(rows) : undefined
      const error = checkNumber(fields[prefix + p.key] ?? '', rule, { limit })
      if (error) errors[prefix + p.key] = error
    }
  }
  return errors
}

/** The proposal request for the form as it is: its valid fields only; null until the data is
 * chosen, and always for batch and eval (nothing trains, so nothing is proposed). */
export function proposalRequest(f: FormState, errors: Readonly<Record<string, string>>): ProposalRequest | null {
  if (!trains(f.algorithm) || !f.datasetId || !f.baseModel.trim()) return null
  if (f.algorithm === 'rlhf' && !(f.rmDatasetId && f.rlDatasetId)) return null
  const blank = (fields: Fields, prefix: string) =>
    Object.fromEntries(Object.entries(fields).filter(([k]) => !((prefix + k) in errors)))
  const valid: FormState = { ...f, params: blank(f.params, ''), stageParams: blank(f.stageParams, ''), extraJson: '{}', autoResume: '', gpus: '' }
  const { body } = buildJobRequest(valid)
  const request = {
    algorithm: f.algorithm,
    backend: f.backend,
    base_model: f.baseModel.trim(),
    dataset_id: f.datasetId,
    config: body?.config ?? {},
  }
  return request as ProposalRequest
}

/** Keys the server sets (paths, the top-level fields): never copied into a new request. */
const NOT_COPIED = new Set(['dataset', 'eval_dataset', 'log_path', 'init_from', 'reference_path', 'algorithm', 'backend', 'base_model'])

/** Split one config section into the form's fields and the rest (for the JSON editor). */
function splitSection(config: Json, specs: readonly ParamSpec[], prefix: string, fields: Fields): Json {
  const rest: Json = {}
  const known = new Set(specs.map((p) => p.key))
  for (const [k, v] of Object.entries(config)) {
    if (NOT_COPIED.has(k)) continue
    const shown = known.has(k) ? text(v) : null
    if (shown !== null) fields[prefix + k] = shown
    else if (!known.has(k)) rest[k] = v
  }
  return rest
}

/** A new job's form with an ended job's settings: same data, same start model, same config. */
export function formFromJob(job: Job): FormState {
  const algorithm = job.algorithm as Algorithm
  const initial = initialForm(algorithm)
  const form: FormState = {
    ...initial,
    backend: job.backend === 'tinker' ? 'tinker' : 'local',
    baseModel: job.parent_model_id ?? job.base_model,
    datasetId: job.dataset_id ?? '',
    autoResume: text(job.auto_resume) ?? initial.autoResume,
    gpus: text(job.gpus) ?? initial.gpus,
  }
  const config = job.config as Json
  let extra: Json
  if (algorithm === 'rlhf') {
    const { sl: _sl, rm: _rm, rl: _rl, ...top } = config
    extra = splitSection(top, PARAMS.rlhf, '', form.params)
    for (const stage of RLHF_STAGES) {
      const section: Json = isObject(config[stage]) ? { ...(config[stage] as Json) } : {}
      if (stage !== 'sl' && typeof section.dataset_id === 'string') {
        form[stage === 'rm' ? 'rmDatasetId' : 'rlDatasetId'] = section.dataset_id
      }
      delete section.dataset_id
      const rest = splitSection(section, RLHF_STAGE_PARAMS[stage], `${stage}.`, form.stageParams)
      if (Object.keys(rest).length) extra[stage] = rest
    }
  } else if (algorithm === 'eval') {
    extra = evalFromConfig(config, form)
  } else {
    extra = splitSection(config, PARAMS[algorithm], '', form.params)
  }
  form.extraJson = JSON.stringify(extra, null, 2)
  return form
}

/** An eval job's config into the form: the server resolved its models, the baseline first,
 * each a library model (its id) or what was evaluated; the scorer's type and argument go to
 * their fields, its other keys to the JSON editor. Returns the JSON editor's part. */
function evalFromConfig(config: Json, form: FormState): Json {
  const { models, scorer, ...rest } = config
  const refs = (Array.isArray(models) ? models : []).map((m) =>
    typeof m === 'string' ? m : String((m as Json).id ?? (m as Json).model ?? ''),
  )
  if (refs.length) {
    form.baseModel = refs[0]
    form.evalModels = refs.slice(1)
  }
  const extra = splitSection(rest, PARAMS.eval, '', form.params)
  if (isObject(scorer)) {
    const { type, pattern, function: fn, reward_model: rm, judge_model: judge, judge_url: url, ...other } = scorer
    if (typeof type === 'string') form.scorer = type
    form.scorerPattern = typeof pattern === 'string' ? pattern : ''
    form.scorerFunction = typeof fn === 'string' ? fn : ''
    form.scorerRewardModel = typeof rm === 'string' ? rm : ''
    form.scorerJudgeModel = typeof judge === 'string' ? judge : ''
    form.scorerJudgeUrl = typeof url === 'string' ? url : ''
    if (Object.keys(other).length) extra.scorer = other
  }
  return extra
}
