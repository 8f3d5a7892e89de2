import '@testing-library/jest-dom/vitest'
import { cleanup } from '@testing-library/react'
import { afterEach } from 'vitest'

// Vitest runs without globals, so Testing Library cannot clean up on its own.
afterEach(cleanup)
// Node's Request resolves the API client's relative URLs against this origin, as a page does.
;(globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalOrigin.1')] = new URL(
  'http://localhost',
)
