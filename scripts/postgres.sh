#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the tests and print its URL on the last line.
# Installs Debian's postgresql package when the server binaries are missing (CI machines).
# Usage: eval "$(scripts/postgres.sh)"   -> exports THINKER_TEST_POSTGRES_URL
set -euo pipefail
PORT="${THINKER_PG_PORT:-55432}"
DIR="${THINKER_PG_DIR:-/tmp/thinker-pg-$PORT}"

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [ -z "$(bindir)" ]; then
  echo "installing PostgreSQL from Debian's packages..." >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >&2
fi
BIN="$(bindir)"
# The server refuses to run as root: run it as the `postgres` user (made by the package).
run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if ! run "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$DIR"
  run "$BIN/initdb" -D "$DIR" -U thinker --auth=trust >/dev/null
  run "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
fi
echo "export THINKER_TEST_POSTGRES_URL=postgresql+asyncpg://thinker@127.0.0.1:$PORT/postgres"
