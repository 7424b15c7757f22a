#!/usr/bin/env bash
# Add the oneCCL backend (--backend ccl) to .venv: the oneCCL runtime and headers from
# PyPI, then a rebuild of fastsample with fastsample._ccl (native/ccl/module.cpp).
#
# Why a script and not `pip install .[ccl]` (what was found on PyPI, Nov 2026):
# - oneccl-cpu 2022.2.0 requires libfabric>=2.6, which is not on PyPI; 2022.0-2022.1.2
#   require impi-rt (Intel MPI), whose libmpi.so.12 and mpiexec collide with the mpich
#   wheel's in one venv. oneCCL runs on either MPI, so the wheels go in with --no-deps.
# - every oneccl-cpu wheel ships lib/libccl.so.1, which needs libccl.so.2 (4 Intel
#   compiler-runtime symbols), but not that file. It is taken from the `oneccl` wheel of
#   the same version (a 92 MB download, of which 143 KB are kept).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${CCL_VERSION:-2022.1.2}
PY=.venv/bin/python
[ -x "$PY" ] || { echo "install-ccl.sh: no .venv; run 'make setup' first" >&2; exit 1; }
PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')

"$PY" -m pip install -q --no-deps "oneccl-cpu==$VERSION" "oneccl-cpu-devel==$VERSION"
if [ ! -e "$PREFIX/lib/libccl.so.2" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --no-deps -d "$tmp" "oneccl==$VERSION"
  "$PY" - "$tmp" "$PREFIX/lib" <<'EOF'
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("oneccl-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/libccl.so.2"))
    with z.open(name) as src, open(pathlib.Path(sys.argv[2]) / "libccl.so.2", "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
fi
# rebuild with the binding; scripts/setup.sh keeps it on later rebuilds
FASTSAMPLE_CCL_ROOT="$PREFIX" "$PY" -m pip install -q --no-deps -e .
"$PY" -c "from fastsample.comm.ccl import load_binding; print('oneCCL', load_binding().version(), 'ready: --backend ccl')"
