#!/usr/bin/env bash
# Create .venv (if missing) and install fastsample into it, building native/.
# torch is pinned here, before the package: its requirement is loose on purpose, and
# with no torch installed pip would otherwise fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
# keep the oneCCL backend where scripts/install-ccl.sh added it
if [ -z "${FASTSAMPLE_CCL_ROOT:-}" ] && [ -f .venv/include/oneapi/ccl.hpp ]; then
  export FASTSAMPLE_CCL_ROOT=$PWD/.venv
fi
.venv/bin/python -m pip install -q -e ".[test,bench,report,tensorboard,pyg,kaminpar]"
.venv/bin/python -c "import fastsample, torch; print('fastsample installed; torch', torch.__version__)"
