// The server's vocabularies, read from the OpenAPI document (openapi.json, generated from the
// server: `python scripts/openapi.py`): job states and dataset kinds, as values and as types.
import { components } from '../../openapi.json'
import type { Schemas } from './client'

export type JobState = Schemas['JobState']
export type DatasetKind = Schemas['DatasetKind']

export const JOB_STATES = components.schemas.JobState.enum as JobState[]
export const DATASET_KINDS = components.schemas.DatasetKind.enum as DatasetKind[]

/** A worker holds the job, or is being started for it (the server's ACTIVE_STATES). */
export const ACTIVE_STATES: readonly JobState[] = ['starting', 'running']
/** Active, or queued to be: the job moves on its own, so the views poll it. */
export const LIVE_STATES: readonly JobState[] = ['queued', ...ACTIVE_STATES]
/** The job may still train (the server's UNFINISHED_STATES); the other states are final. */
export const UNFINISHED_STATES: readonly JobState[] = [...LIVE_STATES, 'paused', 'interrupted']

export const isActive = (state: JobState | undefined): boolean => !!state && ACTIVE_STATES.includes(state)
export const isLive = (state: JobState | undefined): boolean => !!state && LIVE_STATES.includes(state)
