// Deployments: a name /v1 serves (`"model": "assistant"`), pointing at a library model, with an
// opt-in production loop (services/deployments.py). What the dashboard makes of one: its cron
// schedule in words, the next run and the time since an event; its history as a timeline of
// notifications (newest first, a colour per outcome, the jobs each names); the notices a person
// has not seen yet (the latest event promoted, refused or failed); the form's checks, the
// POST and PATCH bodies; and how an app calls it. `cycle` and `history` are plain mappings in
// the OpenAPI document: typed here as the server writes them. Defaults and bounds are the
// server's (openapi.json).
import { components } from '../../../openapi.json'
import type { Schemas } from '../../api/client'

export type Deployment = Schemas['DeploymentPublic']
export type DeploymentCreate = Schemas['DeploymentCreate']
export type DeploymentSettings = Schemas['DeploymentSettings']

export type EventKind = 'skipped' | 'learning' | 'gating' | 'promoted' | 'refused' | 'failed'

/** One entry of a deployment's history, as services/deployments.py records it (a type, not
 *  an interface: it stands for the generated type's plain mapping). */
export type DeploymentEvent = {
  /** Epoch seconds. */
  at: number
  event: EventKind
  /** Promoted and refused: the A/B verdict line; the others: what happened, in words. */
  detail: string
  /** Promoted and refused: the model the gate judged. */
  candidate?: string
  /** Promoted: the model served before. */
  previous?: string
  /** Promoted and refused (after an eval job): the gate's job. */
  eval_job_id?: string
}

/** The cycle in flight: a learn job training the candidate, then the gate's eval job. */
export type DeploymentCycle = {
  stage: 'learning' | 'gating'
  began_at?: number
  /** The feedback dataset version the learn job trains on, and its rows. */
  dataset_id?: string
  rows?: number
  learn_job_id?: string
  /** Gating: the candidate (the learn job's model, or the one a person put to the gate). */
  candidate?: string
  eval_job_id?: string
  /** Promote: "asked". */
  reason?: string
}

export const historyOf = (d: Pick<Deployment, 'history'>): DeploymentEvent[] => d.history as unknown as DeploymentEvent[]
export const cycleOf = (d: Pick<Deployment, 'cycle'>): DeploymentCycle | null => d.cycle as unknown as DeploymentCycle | null

// ---- time -------------------------------------------------------------------------------

const pad = (n: number) => String(n).padStart(2, '0')

/** A span of seconds, roughly: "45 s", "12 min", "3 h", "2 days". */
export function spanWords(seconds: number): string {
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.round(s / 60)} min`
  if (s < 86_400 * 2) return `${Math.round(s / 3600)} h`
  return `${Math.round(s / 86_400)} days`
}

/** How long ago `at` was (epoch seconds), from `now`. */
export function agoWords(at: number, now: number): string {
  return now - at < 10 ? 'just now' : `${spanWords(now - at)} ago`
}

/** When the next scheduled cycle runs, from `now`: "in 3 h", or "due (the next check starts it)". */
export function nextRunWords(nextAt: number | null, now: number): string {
  if (nextAt === null) return 'not scheduled'
  return nextAt <= now ? 'due: the next check starts it' : `in ${spanWords(nextAt - now)}`
}

// ---- the schedule in words --------------------------------------------------------------

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday']
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']
const MACROS: Record<string, string> = {
  '@hourly': 'every hour, on the hour',
  '@daily': 'every day at 00:00 UTC',
  '@midnight': 'every day at 00:00 UTC',
  '@weekly': 'every Sunday at 00:00 UTC',
  '@monthly': 'on day 1 of every month at 00:00 UTC',
  '@yearly': 'every 1 January at 00:00 UTC',
  '@annually': 'every 1 January at 00:00 UTC',
}

const isNumber = (field: string) => /^\d+$/.test(field)
const numbers = (field: string): number[] | null => (field.split(',').every(isNumber) ? field.split(',').map(Number) : null)
const and = (items: string[]) => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`)

/** A day-of-week field as days (0 and 7 are Sunday; names as cron takes them), or null. */
function weekdays(field: string): number[] | null {
  const days: number[] = []
  for (const part of field.toLowerCase().split(',')) {
    const range = part.split('-')
    const day = (p: string) => (isNumber(p) ? Number(p) % 7 : DAY_NAMES.indexOf(p))
    const [from, to] = [day(range[0]), day(range[range.length - 1])]
    if (range.length > 2 || from < 0 || to < 0 || Number(range[0]) > 7 || Number(range.at(-1)) > 7) return null
    const end = to < from ? to + 7 : to
    for (let d = from; d <= end; d++) days.push(d % 7)
  }
  return [...new Set(days)].sort((a, b) => a - b)
}

function daysWords(days: number[]): string {
  if (days.join() === '1,2,3,4,5') return 'every weekday (Monday to Friday)'
  if (days.join() === '0,6') return 'every Saturday and Sunday'
  if (days.length === 7) return 'every day'
  return `every ${and(days.map((d) => DAYS[d]))}`
}

/** A cron schedule (UTC) in words; an expression it does not know how to say is quoted as is.
 *  Null or empty: no schedule. */
export function scheduleWords(schedule: string | null): string {
  const cron = schedule?.trim() ?? ''
  if (!cron) return 'only when asked'
  if (MACROS[cron.toLowerCase()]) return MACROS[cron.toLowerCase()]
  const fields = cron.split(/\s+/)
  const quoted = `cron ${cron} (UTC)`
  if (fields.length !== 5) return quoted
  const [minute, hour, dom, month, dow] = fields
  const anyDay = dom === '*' && month === '*' && dow === '*'
  if (anyDay && hour === '*') {
    if (minute === '*') return 'every minute'
    const every = /^\*\/(\d+)$/.exec(minute)
    if (every) return Number(every[1]) === 1 ? 'every minute' : `every ${every[1]} minutes`
    if (isNumber(minute)) return Number(minute) === 0 ? 'every hour, on the hour' : `every hour at :${pad(Number(minute))}`
    return quoted
  }
  const everyHours = /^\*\/(\d+)$/.exec(hour)
  if (anyDay && everyHours && isNumber(minute)) return `every ${everyHours[1]} hours at :${pad(Number(minute))}`
  const minutes = isNumber(minute) ? Number(minute) : null
  const hours = numbers(hour)
  if (minutes === null || hours === null || minutes > 59 || hours.some((h) => h > 23)) return quoted
  const at = `at ${and(hours.map((h) => `${pad(h)}:${pad(minutes)}`))} UTC`
  if (anyDay) return `every day ${at}`
  if (month !== '*') return quoted
  if (dom === '*') {
    const days = weekdays(dow)
    return days ? `${daysWords(days)} ${at}` : quoted
  }
  const dates = numbers(dom)
  if (dow === '*' && dates && dates.every((d) => d >= 1 && d <= 31)) {
    return `on day ${and(dates.map(String))} of every month ${at}`
  }
  return quoted
}

/** Schedules offered in the form, with what they say. */
export const SCHEDULE_PRESETS: { cron: string; words: string }[] = ['0 3 * * *', '0 * * * *', '0 3 * * 1', '*/15 * * * *'].map((cron) => ({
  cron,
  words: scheduleWords(cron),
}))

// ---- the timeline -----------------------------------------------------------------------

export type Tone = 'ok' | 'warn' | 'bad' | 'neutral' | 'accent'

/** Each event's colour and title: promoted green, refused amber, failed red, skipped grey, and
 *  the cycle's steps (learning, gating) in the accent. */
export const EVENT_LOOK: Record<EventKind, { tone: Tone; title: string }> = {
  promoted: { tone: 'ok', title: 'Promoted' },
  refused: { tone: 'warn', title: 'Refused by the gate' },
  failed: { tone: 'bad', title: 'Failed' },
  skipped: { tone: 'neutral', title: 'Skipped' },
  learning: { tone: 'accent', title: 'Learning' },
  gating: { tone: 'accent', title: 'Gating' },
}

export interface TimelineItem extends DeploymentEvent {
  key: string
  tone: Tone
  title: string
  /** The jobs it names: its eval job, and those its detail mentions ("job job_…"). */
  jobs: string[]
}

/** The job ids a line of text names. */
export function jobsIn(text: string): string[] {
  return [...new Set(text.match(/\bjob_[A-Za-z0-9]+/g) ?? [])]
}

/** The history, newest first (events at the same second: the later recorded first). */
export function timeline(history: readonly DeploymentEvent[]): TimelineItem[] {
  return history
    .map((e, i) => ({ e, i }))
    .sort((x, y) => y.e.at - x.e.at || y.i - x.i)
    .map(({ e, i }) => {
      const look = EVENT_LOOK[e.event] ?? { tone: 'neutral' as const, title: e.event }
      const jobs = [...new Set([...(e.eval_job_id ? [e.eval_job_id] : []), ...jobsIn(e.detail ?? '')])]
      return { ...e, key: `${i}`, tone: look.tone, title: look.title, jobs }
    })
}

/** The cycle in flight in one line. */
export function cycleLine(cycle: DeploymentCycle): string {
  if (cycle.stage === 'learning') {
    const rows = cycle.rows === undefined ? 'the new feedback' : `${cycle.rows} new feedback row${cycle.rows === 1 ? '' : 's'}`
    return `Learning: a learn job trains the candidate on ${rows}`
  }
  return 'Gating: an eval job puts the served model (A) against the candidate (B)'
}

// ---- notices ----------------------------------------------------------------------------

/** The outcomes a person should hear about. */
export const NOTICE_EVENTS: readonly EventKind[] = ['promoted', 'refused', 'failed']

export interface Notice {
  name: string
  event: EventKind
  at: number
  detail: string
}

/** A deployment's latest event, when it is an outcome to hear about. */
export function latestNotice(d: Pick<Deployment, 'name' | 'history'>): Notice | null {
  const [latest] = timeline(historyOf(d))
  if (!latest || !NOTICE_EVENTS.includes(latest.event)) return null
  return { name: d.name, event: latest.event, at: latest.at, detail: latest.detail }
}

/** The notices not seen yet: `seen` holds, per deployment, the time of the latest event seen. */
export function unseenNotices(deployments: readonly Pick<Deployment, 'name' | 'history'>[], seen: Record<string, number>): Notice[] {
  return deployments.flatMap((d) => {
    const notice = latestNotice(d)
    return notice && notice.at > (seen[d.name] ?? -Infinity) ? [notice] : []
  })
}

// ---- the form ---------------------------------------------------------------------------

type Property = { default?: unknown; minimum?: number; maximum?: number; gt?: number; le?: number; pattern?: string }
const CREATE = components.schemas.DeploymentCreate.properties as unknown as Record<string, Property>

/** A setting's default and bounds, as the server documents them. */
function bounds(key: 'retention_days' | 'min_feedback' | 'learn_steps') {
  const p = CREATE[key]
  return { default: Number(p.default), min: p.minimum ?? p.gt ?? 0, max: p.maximum ?? p.le ?? Infinity, exclusiveMin: p.gt !== undefined }
}

export const NAME_PATTERN = new RegExp(CREATE.name.pattern ?? '^[A-Za-z][A-Za-z0-9._-]{0,63}$')

export type Redact = 'none' | 'pii' | 'function'

/** The form as typed: text for the numbers, so a half-typed value is shown as is. */
export interface DeploymentForm {
  name: string
  modelId: string
  logTraffic: boolean
  redact: Redact
  /** `module:function`, with redact "function". */
  redactFunction: string
  retentionDays: string
  /** A cron expression; empty: only when asked. */
  schedule: string
  minFeedback: string
  learnSteps: string
  /** Empty: none (then no candidate is ever served). */
  evalDatasetId: string
}

export function emptyForm(): DeploymentForm {
  return {
    name: '',
    modelId: '',
    logTraffic: Boolean(CREATE.log_traffic.default),
    redact: 'none',
    redactFunction: '',
    retentionDays: String(bounds('retention_days').default),
    schedule: '',
    minFeedback: String(bounds('min_feedback').default),
    learnSteps: String(bounds('learn_steps').default),
    evalDatasetId: '',
  }
}

/** A deployment's settings as the form shows them. */
export function formOf(d: Deployment): DeploymentForm {
  const redact: Redact = d.redact === null ? 'none' : d.redact === 'pii' ? 'pii' : 'function'
  return {
    name: d.name,
    modelId: d.model_id,
    logTraffic: d.log_traffic,
    redact,
    redactFunction: redact === 'function' ? (d.redact ?? '') : '',
    retentionDays: String(d.retention_days),
    schedule: d.schedule ?? '',
    minFeedback: String(d.min_feedback),
    learnSteps: String(d.learn_steps),
    evalDatasetId: d.eval_dataset_id ?? '',
  }
}

export type FormProblems = Partial<Record<keyof DeploymentForm, string>>

function numberProblem(text: string, key: 'retention_days' | 'min_feedback' | 'learn_steps', integer: boolean): string | undefined {
  const b = bounds(key)
  const value = Number(text.trim())
  if (!text.trim() || !Number.isFinite(value)) return integer ? 'a whole number' : 'a number'
  if (integer && !Number.isInteger(value)) return 'a whole number'
  if (b.exclusiveMin ? value <= b.min : value < b.min) return b.exclusiveMin ? `more than ${b.min}` : `at least ${b.min}`
  if (value > b.max) return `at most ${b.max.toLocaleString('en')}`
  return undefined
}

/** What is wrong with the form, field by field (the server checks the rest: the cron
 *  expression, the hook's import, the eval set's kind). `creating`: the name and model too. */
export function formProblems(form: DeploymentForm, creating: boolean): FormProblems {
  const problems: FormProblems = {
    retentionDays: numberProblem(form.retentionDays, 'retention_days', false),
    minFeedback: numberProblem(form.minFeedback, 'min_feedback', true),
    learnSteps: numberProblem(form.learnSteps, 'learn_steps', true),
  }
  if (creating) {
    if (!form.name.trim()) problems.name = 'a name for apps to ask for'
    else if (!NAME_PATTERN.test(form.name.trim())) problems.name = 'a letter, then letters, digits, ".", "_" or "-" (64 at most)'
    if (!form.modelId) problems.modelId = 'the library model it serves'
  }
  if (form.redact === 'function' && !/^[\w.]+:\w+$/.test(form.redactFunction.trim())) problems.redactFunction = 'module:function'
  return Object.fromEntries(Object.entries(problems).filter(([, v]) => v)) as FormProblems
}

/** Every setting of the form, as PATCH and POST take them. */
export function settingsBody(form: DeploymentForm): DeploymentSettings {
  return {
    log_traffic: form.logTraffic,
    redact: form.redact === 'none' ? null : form.redact === 'pii' ? 'pii' : form.redactFunction.trim(),
    retention_days: Number(form.retentionDays.trim()),
    schedule: form.schedule.trim() || null,
    min_feedback: Number(form.minFeedback.trim()),
    learn_steps: Number(form.learnSteps.trim()),
    eval_dataset_id: form.evalDatasetId || null,
  }
}

/** POST /api/deployments's body. */
export function createBody(form: DeploymentForm): DeploymentCreate {
  return { name: form.name.trim(), model_id: form.modelId, ...settingsBody(form) }
}

/** PATCH /api/deployments/{name}'s body: only the settings that changed (the server leaves the
 *  others as they are); empty when nothing did. */
export function settingsPatch(d: Deployment, form: DeploymentForm): Partial<DeploymentSettings> {
  const next = settingsBody(form)
  const now: DeploymentSettings = settingsBody(formOf(d))
  return Object.fromEntries(
    (Object.keys(next) as (keyof DeploymentSettings)[]).filter((k) => next[k] !== now[k]).map((k) => [k, next[k]]),
  ) as Partial<DeploymentSettings>
}

// ---- calling it -------------------------------------------------------------------------

/** How an app asks the deployment (OpenAI's chat completions, `model` its name) and rates an
 *  answer by its id. `auth`: the server wants a token. */
export function curlSnippet(origin: string, name: string, auth = false): string {
  const token = auth ? ` \\\n  -H "Authorization: Bearer $THINKER_TOKEN"` : ''
  return [
    `# Ask it: "model" is the deployment's name`,
    `curl -s ${origin}/v1/chat/completions -H 'Content-Type: application/json'${token} -d '{`,
    `  "model": "${name}", "messages": [{"role": "user", "content": "3+4"}], "max_tokens": 64`,
    `}'`,
    `# {"id": "chatcmpl-…", "choices": [{"message": {"role": "assistant", "content": "…"}, …}], …}`,
    ``,
    `# Rate that answer by its id ("correction": the answer it should have given, optional)`,
    `curl -s -X POST ${origin}/api/deployments/${name}/feedback -H 'Content-Type: application/json'${token} -d '{`,
    `  "completion_id": "chatcmpl-…", "rating": "down", "correction": "7"`,
    `}'`,
  ].join('\n')
}
