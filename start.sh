#!/usr/bin/env bash
# Install Thinker (into .venv) and run the shipped example pipeline end to end:
# validate (the example's own checks + dataset check) -> train (SL, tiny built-in model, CPU) -> eval.
# No GPU, key or network needed. The platform server will take this command's place.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
# shellcheck disable=SC1091
. .venv/bin/activate
exec thinker run --config "${1:-configs/arithmetic.yaml}"
