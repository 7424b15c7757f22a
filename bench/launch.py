"""How the benchmarks launch ranks: the one place that finds mpiexec."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec") or "mpiexec"
