#!/usr/bin/env bash
# Install Thinker (into .venv), build the dashboard when it is there, and start the platform
# on http://127.0.0.1:8000: SQLite, the local engine, the built-in tiny model and the shipped
# example datasets. No GPU, key or network needed. Ctrl-C stops it.
# Settings come from THINKER_* variables (THINKER_PORT, THINKER_DATA_DIR, ...; see HOW_TO_USE.md).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
if [ -f frontend/package.json ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd frontend && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run build)
  else
    echo "[thinker] npm not found: serving the API without the dashboard (install Node.js 20+)" >&2
  fi
fi
# shellcheck disable=SC1091
. .venv/bin/activate
echo "[thinker] starting on http://${THINKER_HOST:-127.0.0.1}:${THINKER_PORT:-8000} (Ctrl-C to stop)"
exec thinker serve "$@"
