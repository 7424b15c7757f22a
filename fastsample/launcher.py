"""Where a launcher (mpiexec, mpirun, srun) is, and what it told this process.

Read before MPI is initialised, so the command lines can decide which rank speaks.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["launch_rank", "find_mpiexec"]

# Where launchers put a process's rank: MPICH/Intel MPI (Hydra), Open MPI, PMIx, MVAPICH.
_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def launch_rank() -> int:
    """This process's rank as its launcher set it, before MPI is initialised (0 alone).

    Slurm's SLURM_PROCID counts only inside an srun step: a batch script has it too."""
    for var in _RANK_VARIABLES:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    if "SLURM_STEP_ID" in os.environ and os.environ.get("SLURM_PROCID", "").isdigit():
        return int(os.environ["SLURM_PROCID"])
    return 0


def find_mpiexec() -> str | None:
    """The mpiexec beside this Python (the mpich wheel's, which matches mpi4py), else the one
    on PATH, else None. The one lookup the tests and benchmarks use to launch ranks."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")
