#!/usr/bin/env bash
# Type-check the engine, the renderers and the algorithms with mypy (settings and paths in
# pyproject.toml's [tool.mypy]): among others, that both backends keep the engine contract of
# backend/thinker/engine/protocols.py. Arguments go to mypy (e.g. other paths to check).
# Uses .venv's Python where there is one (scripts/install.sh makes it), else `python`.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python
if [ -x .venv/bin/python ]; then
  python=.venv/bin/python
fi
exec "$python" -m mypy "$@"
