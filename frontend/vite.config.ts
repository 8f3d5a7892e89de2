import tailwindcss from '@tailwindcss/vite'
import react from '@vitejs/plugin-react'
import { defineConfig } from 'vitest/config'

// The dev server proxies the API and Socket.IO to `thinker serve` on :8000.
const server = process.env.THINKER_URL ?? 'http://127.0.0.1:8000'

export default defineConfig({
  plugins: [react(), tailwindcss()],
  server: {
    proxy: {
      '/api': server,
      '/v1': server,
      '/socket.io': { target: server, ws: true },
    },
  },
  build: { chunkSizeWarningLimit: 5000 },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
    setupFiles: ['src/test/setup.ts'],
    // CI runs these at the lowest priority beside two pytest processes on two cores: a
    // 13-s wizard test timed out at vitest's default 5 s. A limit for a hang, not a speed test.
    testTimeout: 60_000,
  },
})
