// The jobs room: every job's state changes, patched into the cached job list.
import { useQueryClient } from '@tanstack/react-query'
import { useEffect } from 'react'
import type { JobState } from '../api/vocabulary'
import { getSocket } from './socket'

interface JobStateEvent {
  job_id: string
  state: JobState
  step?: number
  total_steps?: number | null
}

export function useJobListEvents(): void {
  const client = useQueryClient()
  useEffect(() => {
    const socket = getSocket()
    const join = () => socket.emit('join_jobs', {})
    const onState = (state: JobStateEvent) => {
      client.invalidateQueries({ queryKey: ['jobs'] })
      client.invalidateQueries({ queryKey: ['job', state.job_id] })
    }
    socket.on('connect', join)
    socket.on('job_state', onState)
    if (socket.connected) join()
    return () => {
      socket.off('connect', join)
      socket.off('job_state', onState)
    }
  }, [client])
}
