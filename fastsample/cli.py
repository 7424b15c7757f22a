"""Conventions shared by the command-line tools: how they parse, fail and report."""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys

from fastsample.atomic import AlreadyExists

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
    import shutil
    from pathlib import Path

    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help keeps the description's layout and shows each option's default (options
    without one, or whose help already says it, are left alone)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help and errors are printed by rank 0 only (every rank of a
    job parses the same arguments, so every rank exits with the same status, but one
    message is enough), and whose errors are one line, without the usage block."""

    def __init__(self, *args, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kw)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def _print_message(self, message, file=None):
        if launch_rank() == 0:
            super()._print_message(message, file)


def agree(comm, prog: str, build):
    """Run ``build()`` on every rank and agree on the outcome: if it failed on any rank,
    rank 0 prints that rank's message (one line) and every rank exits 2, so a start-up
    error never leaves other ranks waiting in a collective. Returns build()'s result."""
    error, result = None, None
    try:
        result = build()
    except Exception as e:  # agreed on below
        error = describe(e)
    errors = comm.allgather_object(error)
    first = next((f"rank {r}: {e}" for r, e in enumerate(errors) if e), None)
    if first:  # every rank stops; one prints
        if comm.rank == 0:
            print(f"{prog}: error: {first}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    return result


def describe(error: Exception) -> str:
    """An exception as a CLI's one-line message."""
    from fastsample.comm import CommError
    from fastsample.config import ConfigError, flag_message  # config builds on this module

    if isinstance(error, AlreadyExists):  # the library says overwrite=True; the CLI's word is a flag
        return f"{error.path}: already exists (pass --overwrite to replace it)"
    if isinstance(error, ConfigError):  # the library names the setting; the CLI's word is its flag
        return flag_message(error)
    if isinstance(error, CommError):  # the library names the backend parameter; the CLIs' flag is --backend
        return re.sub(r"\bbackend '?(\w+)'?", r"--backend \1", str(error))
    return str(error) if isinstance(error, (ValueError, OSError)) else f"{type(error).__name__}: {error}"


def create_comm(prog: str, backend: str):
    """The job's communicator, or None after one line from the launch's rank 0 (every rank
    fails alike when a backend is not installed, so one message is enough)."""
    from fastsample.comm import CommError, create

    try:
        return create(backend)
    except CommError as e:
        if launch_rank() == 0:
            print(f"{prog}: error: {describe(e)}", file=sys.stderr, flush=True)
        return None


def fail(prog: str, error: Exception) -> int:
    """One line on stderr naming the tool and the problem; exit status 2."""
    print(f"{prog}: error: {describe(error)}", file=sys.stderr)
    return 2


def report(record: dict, text: str, as_json: bool) -> int:
    """Print a run's record (as JSON, or as ``text`` plus time and peak memory)."""
    record["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        print(text)
        print(f"time        {record['seconds']:.1f} s, peak RSS {record['peak_rss_mib']:,.0f} MiB")
    return 0
