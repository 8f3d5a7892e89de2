#!/usr/bin/env bash
# Install what the tests need (into .venv), start a throw-away PostgreSQL server (installing
# Debian's package if needed), and run every test: the storage, API and platform tests run
# on SQLite and on PostgreSQL. Without arguments (the whole suite), then the type check and
# the dashboard's tests.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if pg_env="$(scripts/postgres.sh)"; then
  eval "$pg_env"
else
  echo "[test] no PostgreSQL server: its tests are skipped (THINKER_REQUIRE_POSTGRES=1 fails)" >&2
fi
if [ "$#" -eq 0 ]; then
  # The whole suite: the tinker-cookbook's recipes against `thinker serve` run beside pytest
  # (their own virtual environment, mostly installing and waiting on the server), and so do
  # the type check and the dashboard's install, build and lint (minutes of work that need not
  # wait for pytest's; their output is shown after it). They run at the lowest priority: the
  # job workers the tests start run at nice +10, and at an equal share the checks starved them
  # (a 27-s test took 227 s on 2 cores). The dashboard's Vitest and Playwright tests have
  # fixed timeouts of their own and run after pytest.
  cookbook_log="$(mktemp)"
  python tests/cookbook/run_recipes.py >"$cookbook_log" 2>&1 &
  cookbook_pid=$!
  checks_log="$(mktemp)"
  nice -n 19 bash -c 'scripts/typecheck.sh && scripts/test_frontend.sh --build' >"$checks_log" 2>&1 &
  checks_pid=$!
  trap 'kill "$cookbook_pid" "$checks_pid" 2>/dev/null || true' EXIT
fi
if [ "$#" -eq 0 ]; then
  # Three pytest processes, a test file at a time to each (module fixtures are built once):
  # the tests train single-threaded (engine/local/threads.py), so one process left the
  # second core mostly idle while the first trained; with two, the cores were still idle
  # 38% of the time (vmstat, 2 minutes of a run) while both waited on a job worker's start,
  # a server's, a heartbeat's timeout or a lost Ray node. Files go out in collection order,
  # not xdist's default of most tests first: that sent the long few-test files
  # (test_defaults_learn, test_durability, test_ray) last, and one process ran the last of
  # them while the others sat idle; in collection order the many short unit tests come last
  # and even them out.
  python -m pytest -q -p no:cacheprovider --durations=30 -n 3 --dist loadfile \
    --no-loadscope-reorder
else
  python -m pytest -q -p no:cacheprovider --durations=30 "$@"
fi
if [ "$#" -eq 0 ]; then  # the whole suite: the type check and the dashboard's tests too
  if ! wait "$checks_pid"; then
    cat "$checks_log"
    exit 1
  fi
  tail -n 8 "$checks_log"
  frontend_log="$(mktemp)"
  if ! scripts/test_frontend.sh --tests >"$frontend_log" 2>&1; then
    cat "$frontend_log"
    exit 1
  fi
  tail -n 40 "$frontend_log"
  if ! wait "$cookbook_pid"; then
    cat "$cookbook_log"
    exit 1
  fi
  tail -n 6 "$cookbook_log"  # each check's line and the count
fi
