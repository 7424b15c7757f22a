#!/usr/bin/env bash
# Create the DGL baseline environments (not needed for fastsample itself):
#   dgl113    DGL 1.1.3 on torch 2.13.0 (CPU): bench/sampling.py, bench/model.py, and DistDGL
#             1.1.3 in bench/vs_distdgl.py (--dgl-python)
#   dgl210    DGL 2.1.0 on torch 2.13.0 (CPU), graphbolt stubbed: bench/sampling.py's fused sampler
#   dgl210gb  DGL 2.1.0 with GraphBolt, on torch 2.2.1: GraphBolt's library is built for torch
#             2.0.0-2.2.1 only (dgl/graphbolt/libgraphbolt_pytorch_*.so), and PyPI's torch 2.2.1
#             is the CUDA build (~3 GB with its nvidia-* wheels; it runs on the CPU): DistDGL 2.1 +
#             GraphBolt in bench/vs_distdgl.py (--graphbolt-python). WITH_GRAPHBOLT=0 skips it.
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

if [ "${WITH_GRAPHBOLT:-1}" = 1 ]; then
  "$PYTHON" -m venv "$DIR/dgl210gb"
  # torchdata 0.7.1 is the release for torch 2.2.1 (graphbolt's datapipes); numpy<2 for DGL 2.1's C API
  "$DIR/dgl210gb/bin/pip" install -q torch==2.2.1 torchdata==0.7.1 "numpy<2" "setuptools<70" packaging \
      "scipy>=1.1.0" "networkx>=2.1" "requests>=2.19.0" tqdm "psutil>=5.8.0" pandas pydantic pyyaml
  "$DIR/dgl210gb/bin/pip" install -q --no-deps dgl==2.1.0
  "$DIR/dgl210gb/bin/python" -c "import dgl, dgl.graphbolt, torch; print('dgl210gb: dgl', dgl.__version__, 'with graphbolt, torch', torch.__version__)"
fi

for v in dgl113 dgl210; do  # imported as the workers do (bench/dgl_import.py holds the shims)
  PYTHONPATH="$(dirname "$0")" "$DIR/$v/bin/python" -c "
from dgl_import import import_dgl; dgl = import_dgl(); import torch
print('$v: dgl', dgl.__version__, 'torch', torch.__version__)"
done
