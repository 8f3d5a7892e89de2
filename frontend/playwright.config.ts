// End-to-end tests: Debian's Chromium (never a downloaded browser) against a real
// `thinker serve` with a fresh data directory, the built dashboard and the tiny model.
import { defineConfig } from '@playwright/test'

const PORT = Number(process.env.THINKER_E2E_PORT ?? 8765)
const DATA = process.env.THINKER_E2E_DATA ?? '/tmp/thinker-e2e'

export default defineConfig({
  testDir: 'e2e',
  timeout: 900_000, // a bound on a hang: CI runs this beside the Python suite on 2 cores
  expect: { timeout: 30_000 },
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    viewport: { width: 1440, height: 900 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    },
  },
  webServer: {
    command: `rm -rf ${DATA} && ../.venv/bin/python -m thinker serve --port ${PORT} --data-dir ${DATA}`,
    url: `http://127.0.0.1:${PORT}/api/health`,
    timeout: 120_000,
    reuseExistingServer: false,
    env: {
      THINKER_STATIC_DIR: `${process.cwd()}/dist`,
      THINKER_POLL_INTERVAL_S: '0.1',
      HF_HUB_OFFLINE: '1',
      HF_DATASETS_OFFLINE: '1',
    },
  },
})
