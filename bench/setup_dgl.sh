#!/usr/bin/env bash
# Create the two DGL baseline environments used by bench/sampling.py (not needed for
# fastsample itself): DGL 1.1.3 and DGL 2.1.0, CPU wheels, each on torch 2.13.0 (CPU).
#   bash bench/setup_dgl.sh [DIR]     (default DIR: bench/out/dgl-envs)
# Then: --dgl113-python DIR/dgl113/bin/python --dgl210-python DIR/dgl210/bin/python
set -euo pipefail
DIR=${1:-"$(dirname "$0")/out/dgl-envs"}
PYTHON=${PYTHON:-python3}
mkdir -p "$DIR"

"$PYTHON" -m venv "$DIR/dgl113"
"$DIR/dgl113/bin/pip" install -q torch==2.13.0   # pinned first: a looser torch pulls CUDA builds
"$DIR/dgl113/bin/pip" install -q "setuptools<70" packaging numpy
"$DIR/dgl113/bin/pip" install -q dgl==1.1.3

"$PYTHON" -m venv "$DIR/dgl210"
"$DIR/dgl210/bin/pip" install -q torch==2.13.0
"$DIR/dgl210/bin/pip" install -q "setuptools<70" packaging numpy
# --no-deps: dgl 2.1.0 declares torchdata, and resolving it with setuptools<70 swaps
# torch for an older CUDA build. torchdata is only used by dgl.graphbolt, which the
# worker stubs out (graphbolt has no build for torch 2.13).
"$DIR/dgl210/bin/pip" install -q --no-deps dgl==2.1.0
"$DIR/dgl210/bin/pip" install -q "scipy>=1.1.0" "networkx>=2.1" "requests>=2.19.0" tqdm "psutil>=5.8.0" pandas

for v in dgl113 dgl210; do  # imported as the workers do (bench/dgl_import.py holds the shims)
  PYTHONPATH="$(dirname "$0")" "$DIR/$v/bin/python" -c "
from dgl_import import import_dgl; dgl = import_dgl(); import torch
print('$v: dgl', dgl.__version__, 'torch', torch.__version__)"
done
