// Live progress of one Hugging Face import: Socket.IO `dataset_import` events feed the
// query cache; polling the import is the fallback for when the socket is down.
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect } from 'react'
import { api, unwrap, type Schemas } from '../../api/client'
import { getSocket } from '../../hooks/socket'

export type ImportState = Schemas['DatasetImportPublic']

export function useImportProgress(importId: string | null) {
  const client = useQueryClient()
  useEffect(() => {
    if (!importId) return
    const socket = getSocket()
    const join = () => socket.emit('join_imports')
    const onImport = (event: ImportState) => {
      if (event.import_id !== importId) return
      client.setQueryData(['dataset-import', importId], event)
      if (event.state === 'succeeded') client.invalidateQueries({ queryKey: ['datasets'] })
    }
    socket.on('connect', join)
    socket.on('dataset_import', onImport)
    if (socket.connected) join()
    return () => {
      socket.emit('leave_imports')
      socket.off('connect', join)
      socket.off('dataset_import', onImport)
    }
  }, [importId, client])

  return useQuery({
    queryKey: ['dataset-import', importId],
    enabled: importId !== null,
    queryFn: async () =>
      unwrap(await api.GET('/api/datasets/imports/{import_id}', { params: { path: { import_id: importId ?? '' } } })),
    refetchInterval: (query) => (query.state.data?.state === 'running' ? 2000 : false),
  })
}
