#!/usr/bin/env bash
# Create .venv (if missing) and install Thinker with everything the tests need.
# Safe to run again: it only installs what is missing. torch comes first, on its own:
# a CPU machine gets the CPU wheel (a later package asking for torch would otherwise pull
# a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate

if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python -m pip install -q "torch>=2.4,<2.15"
  else
    python -m pip install -q "torch==2.13.0"
  fi
fi
extras="dev,ray"  # ray: the Ray executor's tests start a local cluster (tests/system/test_ray.py)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  extras="dev,ray,gpu"  # gpu: the fused Triton kernels of the local engine's CUDA path
fi
python -m pip install -q -e ".[$extras]"
