"""The one home for launching ranks from tests: the mpiexec lookup, running a module or a
script on one or n ranks with a timeout, and reading what a worker script says it checked.

A launch that outlives its timeout is a test failure that shows the output so far; the whole
process group (mpiexec, its proxies and every rank) is killed first, so nothing is left running.

Worker scripts (tests/*_worker.py) call ``passed(rank, check)`` once per named check per rank,
after that check's assertions; the test names the checks it expects and calls
``assert_checks(proc, ranks, checks)``, which wants exactly that set of (rank, check) lines:
a rank that skips a check, or prints nothing, fails the test.

This module imports nothing heavy at import time: the workers import it on every rank.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from fastsample.launcher import find_mpiexec
from fastsample.trainer.runlog import read_records

REPO = Path(__file__).resolve().parents[1]


def native_built() -> bool:
    """Whether the C++ kernels (fastsample._native) are built here."""
    from fastsample.native import lib

    return lib is not None


def native_or_numpy(module, native: bool, monkeypatch) -> None:
    """Run the calling test on ``module``'s native kernels (skipped where they are not built)
    or, with ``native`` False, on its numpy path (its ``_native`` None for the test)."""
    import pytest

    if native and not native_built():
        pytest.skip("native module not built")
    if not native:
        monkeypatch.setattr(module, "_native", None)


def mfg_equal(a, b) -> bool:
    """Two MFGs (fastsample.sampling.MFG) are the same, array for array."""
    import numpy as np

    return (a.num_dst == b.num_dst and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and np.array_equal(a.src_ids, b.src_ids))


def mpiexec_path() -> str | None:
    """The mpiexec next to this Python (the mpich wheel's), else the one on PATH, else None."""
    return find_mpiexec()


def mpiexec_argv(n: int, *args) -> list[str]:
    """[mpiexec, -n, n, python, args...]; skips the test where there is no mpiexec."""
    exe = mpiexec_path()
    if exe is None:
        import pytest

        pytest.skip("no mpiexec (install the mpich wheel: pip install mpich)")
    return [exe, "-n", str(n), sys.executable, *map(str, args)]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group that `proc` leads (started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def fail(message: str):
    """A test failure (pytest's, so that it reads as one; an AssertionError outside pytest)."""
    try:
        import pytest
    except ImportError:
        raise AssertionError(message) from None
    pytest.fail(message, pytrace=False)


def run(argv, *, timeout: float, env=None, cwd=REPO) -> subprocess.CompletedProcess:
    """Run argv to completion in a process group of its own, capturing text output. Past
    `timeout` seconds the group is killed and the test fails with what it printed."""
    argv = [str(a) for a in argv]
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        fail(f"{' '.join(argv)}\ndid not finish in {timeout} s (killed); its output:\n{out}{err}")
    except BaseException:  # KeyboardInterrupt and the like: leave nothing running
        kill_group(proc)
        proc.wait()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run_module(*args, check=False, timeout=300, env=None) -> subprocess.CompletedProcess:
    """`python -m args...` in a subprocess, from the repository root, the way a user would."""
    proc = run([sys.executable, "-m", *args], timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def mpiexec(n: int, *args, timeout=120, env=None) -> subprocess.CompletedProcess:
    """`python args...` (a script, or -m module, or -c code) on n ranks with mpiexec_path()."""
    return run(mpiexec_argv(n, *args), timeout=timeout, env=env)


def mpi_segments() -> set[str]:
    """The MPI libraries' shared-memory segments in /dev/shm now."""
    from fastsample.comm.mpi import _MPI_SEGMENTS

    shm = Path("/dev/shm")
    return {str(p) for p in shm.iterdir() if p.name.startswith(_MPI_SEGMENTS)} if shm.is_dir() else set()


def left_behind(before: set[str]) -> set[str]:
    """MPI segments made since ``before`` that no live process maps: what a finished job left
    in /dev/shm. A job still running beside it (another test's, another user's) maps its own."""
    from fastsample.comm.mpi import shared_memory

    mapped = set().union(*(shared_memory(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()))
    return mpi_segments() - before - mapped


def train_records(partition, ranks: int, log, *args, timeout=300) -> list[dict]:
    """python -m fastsample.train on `ranks` ranks with --log-json `log`: its epoch records."""
    argv = ["-m", "fastsample.train", "--data", partition, "--log-json", log, *args]
    proc = run_module(*argv[1:], timeout=timeout) if ranks == 1 else mpiexec(ranks, *argv, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_records(log)


def train_many(partition, ranks: int, runs: dict, *, timeout=600, output=False):
    """Several python -m fastsample.train runs on `ranks` ranks, one after another in one
    launch (tests/commands_worker.py calls the command's main() per run, so start-up is paid
    once): `runs` maps a name to (log, [arguments]) or (log, [arguments], its partition); each
    run gets --data `partition` (or its own) and --log-json `log`. Returns {name: its epoch
    records}, as train_records would; with `output`, ({name: records}, the finished launch)."""
    proc = run_many(ranks, [("fastsample.train", ["--data", r[2] if len(r) > 2 else partition, "--log-json", r[0],
                                                  *r[1]]) for r in runs.values()], timeout=timeout)
    records = {name: read_records(r[0]) for name, r in runs.items()}
    return (records, proc) if output else records


def run_many(ranks: int, commands: list, *, timeout=600) -> subprocess.CompletedProcess:
    """Several commands, each (module, [arguments]) as ``python -m module arguments...``
    would run (fastsample.train, fastsample.infer: the module's main()), one after another
    in one launch on `ranks` ranks (tests/commands_worker.py). Every one must exit 0, the
    first that does not ends the launch; returns the launch."""
    listed = [[module, [str(a) for a in args]] for module, args in commands]
    worker = [REPO / "tests" / "commands_worker.py", json.dumps(listed)]
    proc = run([sys.executable, *worker], timeout=timeout) if ranks == 1 else mpiexec(ranks, *worker, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def run_commands(ranks: int, commands: list, out, *, timeout=600) -> list[subprocess.CompletedProcess]:
    """Several command lines, each (module, [arguments]) as ``mpiexec -n ranks python -m
    module arguments...`` would run it, one after another in one launch
    (tests/commands_worker.py: the module's main() per command, `out` a directory for what
    each writes). Returns per command what its own launch would have given: the exit
    status (the ranks' largest), stdout and stderr (every rank's, in rank order). A command
    that fails does not stop the next."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    listed = [[module, [str(a) for a in args]] for module, args in commands]
    proc = mpiexec(ranks, REPO / "tests" / "commands_worker.py", json.dumps(listed), out, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    read = lambda i, kind: [(out / f"{i}-{r}.{kind}").read_text() for r in range(ranks)]
    return [subprocess.CompletedProcess([module, *args], max(map(int, read(i, "code"))), "".join(read(i, "out")),
                                        "".join(read(i, "err"))) for i, (module, args) in enumerate(listed)]


# --- worker scripts -----------------------------------------------------------------------

_PASSED = re.compile(r"^rank (\d+) ([\w.-]+): ok(?: .*)?$", re.MULTILINE)


def passed(rank: int, check: str, note: str = "") -> None:
    """In a worker: say that `check` passed on `rank` (call it after the check's assertions).
    One write of the whole line, so that mpiexec never splices another rank's output into it."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), f"rank {rank} {check}: ok{' ' + note if note else ''}\n".encode())


def run_worker(main) -> None:
    """A worker's entry point: main(), and if it fails, the traceback and an abort of the
    whole job, so one rank's failure never leaves the others waiting in a collective."""
    try:
        main()
    except BaseException:
        import traceback

        from fastsample.comm import create

        traceback.print_exc()
        sys.stderr.flush()
        create("mpi").abort(1)


def worker_checks(stdout: str) -> list[tuple[int, str]]:
    """The (rank, check) pairs that passed() lines in `stdout` report, in order."""
    return [(int(m[1]), m[2]) for m in _PASSED.finditer(stdout)]


def assert_checks(proc: subprocess.CompletedProcess, ranks: int, checks, among=()) -> None:
    """The worker run `proc` exited 0 and reported every one of `checks` on every rank
    0..ranks-1, once each, and nothing else; `among`: the checks of a launch that several
    tests share, whose lines for checks other than `checks` are another test's."""
    output = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, f"exited {proc.returncode}\n{output}"
    others = set(among) - set(checks)
    got = [(rank, check) for rank, check in worker_checks(proc.stdout) if check not in others]
    want = {(r, c) for r in range(ranks) for c in checks}
    missing, unexpected = sorted(want - set(got)), sorted(set(got) - want)
    repeated = sorted({x for x in got if got.count(x) > 1})
    assert not (missing or unexpected or repeated), \
        f"checks missing {missing}, unexpected {unexpected}, repeated {repeated}\n{output}"
