#!/usr/bin/env bash
# The dashboard's tests: install its packages (npm ci), type-check and build it, lint it
# (oxlint; a warning fails too), run the Vitest unit tests, then the Playwright end-to-end
# tests in Debian's Chromium against a real server (installing the chromium package when it
# is missing). Screenshots of every view land in docs/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/../frontend"
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests..." >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
fi
npm ci --no-audit --no-fund --loglevel=error
npm run build
npm run lint
npx vitest run
npx playwright test
