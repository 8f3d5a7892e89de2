// One Socket.IO connection for the app; each live stream has its own hook on top of it.
import { io, type Socket } from 'socket.io-client'
import { useUiStore } from '../state/ui'

let socket: Socket | null = null

export function getSocket(): Socket {
  if (socket === null) {
    socket = io({
      path: '/socket.io',
      transports: ['websocket'],
      auth: (cb) => cb({ token: useUiStore.getState().token || undefined }),
    })
  }
  return socket
}

/** For tests: forget the connection so the next getSocket() makes a new one. */
export function resetSocket(): void {
  socket?.disconnect()
  socket = null
}
