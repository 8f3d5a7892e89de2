#!/usr/bin/env bash
# Install what the tests need (into .venv) and run every test.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python -m pytest -q -p no:cacheprovider "$@"
