// The learn flow in React: POST /api/models/{id}/learn, the job polled every second until it is
// final, then model n+1 looked up and switched to; every answer moves the state machine
// (learnFlow.ts), and the panels' latest answers give the "before".
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useEffectEvent, useReducer } from 'react'
import { errorMessage } from '../../api/client'
import { findLearnedModel, learnBody, readJob, startLearning, type ModelDetail } from './learn'
import { IDLE, isBusy, learnReducer, pickBefore, type Exchange, type LearnRequest } from './learnFlow'

/** A learning job takes seconds on the tiny model: poll fast, a person is waiting. */
export const POLL_MS = 1_000

interface Options {
  /** The conversation's latest answers, read when model n+1 arrives. */
  exchanges: Exchange[]
  /** Put `to` where `from` is picked (the new model in, or the old one back). */
  onSwitch: (from: string, to: string) => void
}

export function useLearn({ exchanges, onSwitch }: Options) {
  const [state, dispatch] = useReducer(learnReducer, IDLE)
  const client = useQueryClient()

  const submit = useMutation({
    mutationFn: (request: LearnRequest) =>
      startLearning(request.learner, learnBody(request.choice.dataset.id, request.steps)),
    onMutate: (request) => dispatch({ type: 'submit', request }),
    onSuccess: (job) => {
      client.setQueryData(['job', job.id], job)
      dispatch({ type: 'job', job })
    },
    onError: (error) => dispatch({ type: 'refused', reason: errorMessage(error) }),
  })

  const jobId = state.phase === 'training' || state.phase === 'finding' ? state.job.id : null
  const job = useQuery({
    queryKey: ['job', jobId],
    queryFn: () => readJob(jobId as string),
    enabled: state.phase === 'training',
    refetchInterval: state.phase === 'training' ? POLL_MS : false,
  })
  useEffect(() => {
    if (job.data) dispatch({ type: 'job', job: job.data })
  }, [job.data])

  // The model is registered with the job's last checkpoint; a moment's lag is retried.
  const found = useQuery({
    queryKey: ['learned-model', jobId],
    queryFn: () => findLearnedModel(jobId as string),
    enabled: state.phase === 'finding',
    retry: 3,
    retryDelay: POLL_MS,
    staleTime: Infinity,
  })
  // Model n+1 arrived: the "before" is the conversation as it is now, and it takes the
  // learner's place in the selection as it is now.
  const arrive = useEffectEvent((learner: string, model: ModelDetail) => {
    dispatch({ type: 'found', model, before: pickBefore(exchanges, learner) })
    void client.invalidateQueries({ queryKey: ['playground-models'] })
    onSwitch(learner, model.id)
  })
  const learner = state.phase === 'finding' ? state.request.learner : null
  useEffect(() => {
    if (learner === null) return
    if (found.data) arrive(learner, found.data)
    else if (found.isError) {
      dispatch({ type: 'lost', reason: `the job succeeded, but its model could not be read: ${errorMessage(found.error)}` })
    }
  }, [learner, found.data, found.isError, found.error])

  const back = () => {
    if (state.phase !== 'learned') return
    dispatch({ type: 'back' })
    onSwitch(state.model.id, state.request.learner)
  }
  const forward = () => {
    if (state.phase !== 'learned') return
    dispatch({ type: 'forward' })
    onSwitch(state.request.learner, state.model.id)
  }
  return {
    state,
    // One learn at a time: the button is disabled meanwhile, and a second call is ignored.
    start: (request: LearnRequest) => { if (!isBusy(state)) submit.mutate(request) },
    back,
    forward,
    dismiss: () => dispatch({ type: 'dismiss' }),
    /** The last poll failed (the server restarting, say); polling goes on. */
    pollError: job.isError ? errorMessage(job.error) : null,
  }
}
