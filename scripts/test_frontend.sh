#!/usr/bin/env bash
# The dashboard's tests: install its packages (npm ci), type-check and build it, lint it
# (oxlint; a warning fails too), run the Vitest unit tests, then the Playwright end-to-end
# tests in Debian's Chromium against a real server (installing the chromium package when it
# is missing). Screenshots of every view land in docs/screenshots/.
#
# `--build` does the first half (install, build, lint), `--tests` the second (Vitest,
# Playwright); no argument does both. ./test.sh runs the first beside pytest at nice 19 and the
# second after it: starved of CPU beside two pytest processes, Vitest missed its fixed 60-s
# worker start timeout ("Timeout waiting for worker to respond", CI of c4f0a3d) even with one
# worker thread, and a 13-s test there passed its 60-s test timeout.
set -euo pipefail
part="${1:-all}"
cd "$(dirname "$0")/../frontend"
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests..." >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
fi
if [ "$part" = all ] || [ "$part" = --build ]; then
  npm ci --no-audit --no-fund --loglevel=error
  npm run build
  npm run lint
fi
if [ "$part" = --build ]; then
  exit 0
fi
# One worker thread: on an idle 2-core machine the tests took 72 s of wall (82 s of CPU) so,
# against 78 s (86 s) forked.
npx vitest run --pool=threads --maxWorkers=1
npx playwright test
