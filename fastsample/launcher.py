"""Where a launcher (mpiexec, mpirun, srun) is, and what it told this process.

Read before MPI is initialised, so the command lines can decide which rank speaks.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["launched", "launch_rank", "local_ranks", "sleep_idle_threads_if_oversubscribed", "find_mpiexec"]

# Where launchers put a process's rank: MPICH/Intel MPI (Hydra), Open MPI, PMIx, MVAPICH.
_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def launched() -> bool:
    """Whether a launcher (mpiexec, mpirun, srun) started this process as a rank."""
    return any(os.environ.get(v, "").isdigit() for v in _RANK_VARIABLES) or "SLURM_STEP_ID" in os.environ


def say(text: str) -> None:
    """``text`` and a newline on stderr in one write: every rank of a job writes into its
    launcher's stderr, and a line written in pieces (print writes the text, then the
    newline) can be cut by another rank's line printed at the same moment."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a stream without a file (a test's)
        print(text, file=sys.stderr, flush=True)
        return
    sys.stderr.flush()
    data = (text + "\n").encode(errors="replace")
    while data:
        data = data[os.write(fd, data):]


def launch_rank() -> int:
    """This process's rank as its launcher set it, before MPI is initialised (0 alone).

    Slurm's SLURM_PROCID counts only inside an srun step: a batch script has it too."""
    for var in _RANK_VARIABLES:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    if "SLURM_STEP_ID" in os.environ and os.environ.get("SLURM_PROCID", "").isdigit():
        return int(os.environ["SLURM_PROCID"])
    return 0


# How many ranks share this node: MPICH/Intel MPI (Hydra), Open MPI, PMIx, MVAPICH.
_LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE",
                         "MV2_COMM_WORLD_LOCAL_SIZE")


def local_ranks() -> int:
    """How many ranks of this job run on this node, as the launcher said (1 alone).

    srun says it per node ("3,2" or "2(x4)"): the largest count is taken, which can only
    overstate it."""
    for var in _LOCAL_SIZE_VARIABLES:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    if "SLURM_STEP_ID" in os.environ:
        counts = [t.split("(")[0] for t in os.environ.get("SLURM_STEP_TASKS_PER_NODE", "").split(",")]
        if all(c.isdigit() for c in counts):  # str.split gives at least one item
            return max(int(c) for c in counts)
    return 1


def default_threads() -> int:
    """Threads per rank where none are given: OMP_NUM_THREADS, else the cores this rank may
    run on, shared among this node's ranks where they are not bound (the share torch's Intel
    OpenMP takes under MPI by itself; the samplers' pool took every core)."""
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    if omp.isdigit() and int(omp) > 0:
        return min(int(omp), os.cpu_count() or int(omp))  # Numba's pool holds at most the CPUs
    cores = len(os.sched_getaffinity(0))
    bound = cores < (os.cpu_count() or cores)  # bound by the launcher: the cores are this rank's
    return cores if bound else max(1, cores // local_ranks())


def sleep_idle_threads_if_oversubscribed(threads: int | None) -> str | None:
    """Set OMP_WAIT_POLICY=PASSIVE when this node's ranks x threads exceed the cores they run on.

    libgomp's idle threads spin by default; where two ranks share a core, one rank's spinning
    pool takes the core the other needs, and every collective waits for the scheduler (two
    ranks x two threads on two cores: a step several times slower). Read once, when OpenMP
    loads, so this runs before torch or the native module is imported. A user's own
    OMP_WAIT_POLICY is left alone. Returns the note to print, or None where nothing was set.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        return None
    cores = len(os.sched_getaffinity(0))
    if threads is None:
        threads = default_threads()
    if threads <= 1:  # no pool to idle
        return None
    ranks = local_ranks()
    # A rank bound to fewer cores than the node has is taken to own them (srun --cpu-bind,
    # mpiexec -bind-to): only its own threads compete for them.
    bound = cores < (os.cpu_count() or cores)
    if threads <= cores and (bound or ranks * threads <= cores):
        return None
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    who = f"{threads} threads on this rank's {cores} cores" if bound else \
        f"{ranks} rank{'s' if ranks > 1 else ''} x {threads} threads on this node's {cores} cores"
    return (f"note: {who}: idle OpenMP threads sleep rather than spin (OMP_WAIT_POLICY=PASSIVE; "
            "set OMP_WAIT_POLICY yourself to choose)")


def find_mpiexec() -> str | None:
    """The mpiexec beside this Python (the mpich wheel's, which matches mpi4py), else the one
    on PATH, else None. The one lookup the tests and benchmarks use to launch ranks."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def die_with(parent: int) -> None:
    """This (forked) process gets SIGKILL when ``parent`` ends (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent went before that took effect
        os._exit(1)
