import '@testing-library/jest-dom/vitest'
import { cleanup, configure } from '@testing-library/react'
import { afterEach } from 'vitest'

// Vitest runs without globals, so Testing Library cannot clean up on its own.
afterEach(cleanup)
// CI runs these at the lowest priority beside two pytest processes on two cores, where a page
// took longer than findBy/waitFor's default 1 s to show its data. A limit for a hang, not a
// speed test: a check that holds passes as soon as it holds.
configure({ asyncUtilTimeout: 15_000 })
// Node's Request resolves the API client's relative URLs against this origin, as a page does.
;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL(
  'http://localhost',
)
