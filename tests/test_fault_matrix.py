"""The fault matrix (issue 53): one rank fails in each phase a job passes through, by a
Python exception, kill -9, a full disk where the phase writes, or a stop (the watchdog's
case). Each cell launches the real job with a fault injected (fastsample/faults.py) and
asserts: it ends non-zero within 30 s of the fault (a stall: within the watchdog's limit +
10 s), with one line naming the rank, the phase and the cause; no file is half-written;
and --resume continues from the last complete checkpoint with exactly the per-step losses
of the uninterrupted run (the resumes of a group share one launch).
"""

import shutil
import time
from pathlib import Path

import pytest

from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.phases import NAMES
from fastsample.partition import partition_dataset
from helpers import left_behind, mpi_segments, mpiexec, train_many
from fastsample.trainer.runlog import read_records

pytestmark = pytest.mark.mpi

TRAIN, INFER = "python -m fastsample.train", "python -m fastsample.infer"
ARGS = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--threads", "1", "--quiet", "--epochs", "3",
        "--eval-every", "0"]
STEPS = 4  # per epoch: 1,500 nodes x 0.2 train over 2 ranks, 40 a batch (4 ranks: 20 a batch)
E1 = None  # a per-step phase's entry at epoch 1, step 1 (epoch 0's checkpoint exists by then)
# group: (its arguments, [(phase, rank, the entry (from 0) the fault comes at)])
GROUPS = {
    "plain": ([], [("sample", 1, E1), ("gather1", 0, E1), ("gather2", 1, E1), ("forward", 0, E1),
                   ("allreduce", 1, E1), ("optimizer", 0, E1), ("checkpoint", 0, 1), ("checkpoint", 1, 1),
                   ("log", 0, 1)]),
    "sampled": (["--eval-every", "1"], [("evaluation", 1, 1)]),
    "layerwise": (["--eval-every", "1", "--eval", "full"], [("layerwise", 0, 1)]),
    "startup": (["--resume"], [("startup", 1, 0), ("read", 0, 0), ("prepare", 1, 0)]),
    # a link task's start-up counts its edges with the other ranks: rank 1 failing before
    # that leaves rank 0 inside it, out of the agreement's reach (comm/agree.py: stranded)
    "link": (["--task", "link", "--batch-size", "100", "--resume"], [("read", 1, 0)]),
}
TYPED = ["--embed-dim", "8"]
# featureless node types: the embeddings' own update, and every rank writing its shard of a checkpoint
TYPED_CELLS = [("embedding", 1, E1), ("checkpoint", 1, 1)]
CONCURRENT = 2


def writes(group: str, phase: str, rank: int) -> bool:
    """Whether the rank writes a file in that phase (a full disk is a cell there): rank 0 the
    log and checkpoints, every rank its embedding shard (typed)."""
    return phase == "log" and rank == 0 or phase == "checkpoint" and (rank == 0 or group == "typed")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

    root = tmp_path_factory.mktemp("matrix")
    write_synthetic(root / "g", SynthConfig(num_nodes=1500, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.2, seed=3), progress=False)
    for parts in (2, 4):
        partition_dataset(root / "g", root / f"p{parts}", parts, progress=False)
    from conftest import run_module

    proc = run_module("fastsample.data", "link-split", root / "g", root / "gl", "--quiet")
    assert proc.returncode == 0, proc.stderr
    partition_dataset(root / "gl", root / "link", 2, progress=False)
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    partition_dataset(root / "h", root / "typed", 2, progress=False)
    return root


def group_args(name: str) -> list:
    return [*ARGS, *(GROUPS[name][0] if name in GROUPS else [])]


@pytest.fixture(scope="module")
def full(data, tmp_path_factory) -> dict:
    """{group: (the uninterrupted run's records, its checkpoint directory)}, in one launch per data."""
    root = tmp_path_factory.mktemp("full")
    names = ["plain", "sampled", "layerwise"]
    runs = {n: (root / f"{n}.jsonl", [*group_args(n), "--checkpoint-dir", root / n]) for n in names}
    records = train_many(data / "p2", 2, runs)
    for name, part, args in (("typed", "typed", [*ARGS, *TYPED]), ("link", "link", [a for a in group_args("link") if a != "--resume"])):
        records[name] = train_many(data / part, 2, {name: (root / f"{name}.jsonl", [
            *args, "--checkpoint-dir", root / name])})[name]
    out = {n: (records[n], root / n) for n in [*names, "typed", "link"]}
    out["startup"] = out["plain"]
    assert len(records["plain"][0]["step_losses"]) == STEPS
    return out


def faulted(ranks: int, module: str, args: list, fault: str, tmp: Path, limit: float = 30):
    """The job run with FASTSAMPLE_FAULT=``fault``: it ended non-zero within ``limit``
    seconds of the fault; returns (its lines of our error, its stderr)."""
    import os

    mark = tmp / "fault.time"
    mark.unlink(missing_ok=True)
    env = {**os.environ, "FASTSAMPLE_FAULT": fault, "FASTSAMPLE_FAULT_MARK": str(mark)}
    proc = mpiexec(ranks, "-m", module, *args, env=env, timeout=limit + 90)
    ended = time.time()
    assert mark.exists(), f"{fault}: the fault was never reached\n" + proc.stdout + proc.stderr
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert ended - float(mark.read_text()) < limit, f"{fault}: ended {ended - float(mark.read_text()):.1f} s after it"
    prog = TRAIN if module == "fastsample.train" else INFER
    return [line for line in proc.stderr.splitlines() if line.startswith(f"{prog}: error: ")], proc.stderr


# where the matrix's faults come (epoch 1: E1, or an epoch-end phase's entry 1), as the line says it:
# a step's index, the epoch's evaluation, or its end (once the step past the last one)
POSITION = {**dict.fromkeys(("evaluation", "layerwise"), " (epoch 1, evaluation)"),
            "checkpoint": " (epoch 1, after its steps)", "log": " (epoch 0, after its steps)",  # (the header: entry 0)
            **dict.fromkeys(("startup", "read", "prepare"), "")}


def check_line(lines: list, stderr: str, phase: str, rank: int, kind: str, position: str | None = None) -> None:
    assert len(lines) == 1, stderr
    line = lines[0]
    at = NAMES[phase] + (POSITION.get(phase, " (epoch 1, step 1)") if position is None else position)
    if kind == "kill":
        assert f": error: rank {rank}: killed by SIGKILL in {at}" in line, line
    else:
        assert f": error: rank {rank}, in {at}" in line, line
        assert ("no space left" if kind == "diskfull" else "InjectedFault: injected fault") in line, line


def complete(ck: Path) -> list[str]:
    """The checkpoint files there, each loadable (none half-written under a real name)."""
    import torch

    names = sorted(f.name for f in ck.iterdir() if not f.name.startswith("."))
    for name in names:
        torch.load(ck / name, weights_only=False, mmap=True)
    return names


def steps(records) -> list:
    return [x for r in records for x in r["step_losses"]]


def cells():
    listed = [(group, cell) for group, (_, phases) in GROUPS.items() for cell in phases]
    return [(group, phase, rank, nth, kind) for group, (phase, rank, nth) in listed + [("typed", c) for c in TYPED_CELLS]
            for kind in ["raise", "kill"] + (["diskfull"] if writes(group, phase, rank) else [])]


def test_every_phase_and_kind_ends_the_job_with_one_line_and_resumes_bitwise(data, full, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()

    def run(cell):  # launches CONCURRENT at a time: a launch spends much of its time waiting (imports, aborts)
        group, phase, rank, nth, kind = cell
        name = f"{group}-{phase}-{rank}-{kind}"
        ck, log, work = tmp_path / name, tmp_path / f"{name}.jsonl", tmp_path / f"{name}.work"
        work.mkdir()
        records, full_ck = full[group]
        args = group_args(group) if group != "typed" else [*ARGS, *TYPED]
        nth = len(records[0]["step_losses"]) + 1 if nth is E1 else nth
        part = data / {"typed": "typed", "link": "link"}.get(group, "p2")
        if "--resume" in args:  # a resumed job that fails while starting: its checkpoints stand
            ck.mkdir()
            shutil.copy(full_ck / "epoch-0.pt", ck)
        lines, err = faulted(2, "fastsample.train", ["--data", part, *args, "--checkpoint-dir", ck, "--log-json", log],
                             f"{phase}:{rank}:{kind}:{nth}", work)
        check_line(lines, err, phase, rank, kind)
        kept = complete(ck)
        assert kept, name
        orphans = [n for n in kept if ".embed-" in n and f"{n.split('.embed-')[0]}.pt" not in kept]
        # a save that failed on a full disk took its shards with it (a rank killed, or raising
        # out of it, leaves the others' shards to the next save's pruning: checked after the resume)
        assert kind != "diskfull" or not orphans, (name, orphans)
        if log.exists():  # every line whole
            epochs = [r["epoch"] for r in read_records(log)]
            assert epochs == list(range(len(epochs)))
        newest = max(int(n.split("-")[1].split(".")[0]) for n in kept if ".embed-" not in n)
        return name, part, (tmp_path / f"{name}.resumed.jsonl", [*[a for a in args if a != "--resume"],
                                                                  "--checkpoint-dir", ck, "--resume"], part), \
            records[newest + 1:]

    with ThreadPoolExecutor(CONCURRENT) as pool:
        done = list(pool.map(run, cells()))
    matrix_s = time.time() - t0
    for part in {p for _, p, _, _ in done}:  # the resumes of one data in one launch
        runs = {name: (run_args, expected) for name, p, run_args, expected in done if p == part}
        got = train_many(part, 2, {name: r for name, (r, _) in runs.items()})
        for name, (_, expected) in runs.items():
            assert steps(got[name]) == steps(expected), name
            assert not [f.name for f in (tmp_path / name).iterdir() if f.name.startswith(".")], name
            # a killed rank's save left shards no epoch-N.pt names: the next save removed them
            files = {f.name for f in (tmp_path / name).iterdir()}
            assert not [f for f in files if ".embed-" in f and f"{f.split('.embed-')[0]}.pt" not in files], name
    print(f"fault matrix: {len(done)} cells on 2 ranks in {matrix_s:.0f} s ({CONCURRENT} at a time), resumes in "
          f"{time.time() - t0 - matrix_s:.0f} s")


def test_four_ranks(data, tmp_path):
    # 4 steps an epoch at 20 a batch: entry 5 is epoch 1, step 1; save 1 is epoch 1's
    args = [*ARGS, "--batch-size", "20"]
    faults = {"gather1:3:raise:5": "rank 3, in gather round 1",
              "allreduce:2:kill:5": "rank 2: killed by SIGKILL in the gradient all-reduce",
              "checkpoint:0:diskfull:1": "rank 0, in a checkpoint save"}
    for i, (fault, line) in enumerate(faults.items()):
        (tmp_path / str(i)).mkdir()
        shm = mpi_segments()
        lines, err = faulted(4, "fastsample.train", ["--data", data / "p4", *args, "--checkpoint-dir",
                                                     tmp_path / f"ck{i}"], fault, tmp_path / str(i))
        assert len(lines) == 1 and line in lines[0], err
        assert complete(tmp_path / f"ck{i}") == ["epoch-0.pt"]
        # no MPI shared memory left behind (a later job could start on a stale segment)
        assert not left_behind(shm), fault
    runs = {i: (tmp_path / f"{i}.jsonl", [*args, "--checkpoint-dir", tmp_path / f"ck{i}", "--resume"])
            for i in range(len(faults))}
    runs["full"] = (tmp_path / "full.jsonl", args)
    got = train_many(data / "p4", 4, runs)  # the resumes and the uninterrupted run, in one launch
    for i in range(len(faults)):
        assert steps(got[i]) == steps(got["full"][1:]), fault


@pytest.mark.parametrize("phase, kind", [("read", "raise"), ("read", "kill"), ("layerwise", "raise"),
                                         ("layerwise", "kill"), ("output", "raise"), ("output", "kill"),
                                         ("output", "diskfull")])
def test_infer(data, full, tmp_path, phase, kind):
    _, ck = full["plain"]
    out = tmp_path / "emb"
    args = ["--data", data / "p2", "--checkpoint", ck / "epoch-2.pt", "--out", out, "--quiet"]
    rank = 1 if kind != "diskfull" else 0
    # within seconds: a rank failing inside the layer-wise pass does not wait (agree.WAIT_S) for
    # the others, held in one of its collectives (agree.ALIKE_S)
    lines, err = faulted(2, "fastsample.infer", args, f"{phase}:{rank}:{kind}", tmp_path, limit=6)
    check_line(lines, err, phase, rank, kind, "")  # inference has no epochs
    assert not out.exists()
    proc = mpiexec(2, "-m", "fastsample.infer", *args)  # the next run writes it, and no temporary stays
    assert proc.returncode == 0, proc.stderr
    assert sorted(f.name for f in tmp_path.iterdir() if f.name.startswith(".emb")) == []


@pytest.mark.parametrize("ranks, phase", [(2, "gather1"), (2, "allreduce"), (4, "gather2")])
def test_a_stopped_rank_is_named_by_every_live_rank_within_the_watchdog_time(data, tmp_path, ranks, phase):
    limit = 3
    batch = ["--batch-size", "20"] if ranks == 4 else []  # 4 steps an epoch either way
    lines, err = faulted(ranks, "fastsample.train", ["--data", data / f"p{ranks}", *ARGS, *batch, "--stall-timeout",
                                                     limit, "--checkpoint-dir", tmp_path / "ck"],
                         f"{phase}:1:stall:{STEPS + 1}", tmp_path, limit=limit + 10)
    assert complete(tmp_path / "ck") == ["epoch-0.pt"]  # the last complete checkpoint stands
    # every live rank names the stopped one (they stall in the same collective, and each
    # waits GRACE_S for answers before the first abort)
    assert sorted(int(line.split("error: rank ")[1].split(":")[0]) for line in lines) == \
        [r for r in range(ranks) if r != 1], err
    for line in lines:
        assert "stalled" in line and "waiting for rank 1 (no answer: stopped, or hung outside Python)" in line, line
        assert f"(--stall-timeout {limit})" in line, line
    assert "Abort(" not in err, err  # MPI's banner would only repeat the exit status



@pytest.mark.parametrize("kind", ["raise", "diskfull"])
def test_infer_failing_as_it_writes_the_index_is_one_line_and_exit_2_everywhere(data, full, tmp_path, kind):
    # rank 0 writes orig_ids.npy, head.npz and index.json after the others had returned 0: a full
    # disk there gave three chained tracebacks and exit 1 (rank 0's alone); entry 2 of the output
    # phase: the rows (0), the wait for every rank's (1), the index (2)
    _, ck = full["plain"]
    out = tmp_path / "emb"
    args = ["--data", data / "p2", "--checkpoint", ck / "epoch-2.pt", "--out", out, "--quiet"]
    lines, err = faulted(2, "fastsample.infer", args, f"output:0:{kind}:2", tmp_path, limit=6)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert ("no space left" if kind == "diskfull" else "injected fault") in lines[0], lines[0]
    assert not out.exists() and [f.name for f in tmp_path.iterdir() if f.name.startswith(".emb")] == []


def test_a_rank_killed_as_it_starts_leaves_no_mpi_shared_memory(tmp_path):
    # A rank killed within a second of MPI's start: its supervisor looks at the rank's mappings
    # once a second, and missed the segments of a rank killed sooner (seen in CI, on 4 ranks:
    # a segment left in /dev/shm). Here the rank maps a segment as MPI's start does, says so
    # (supervisor.segments_made, as cli.create_comm does) and is killed at once.
    import os
    import subprocess
    import sys

    segment = Path("/dev/shm") / f"mpich_shm_fastsample_test_{os.getpid()}"
    code = f"""
import mmap, os, signal
from fastsample.supervisor import segments_made, supervised
def main():
    with open({str(segment)!r}, "w+b") as f:
        f.truncate(4096)
        kept = mmap.mmap(f.fileno(), 4096)
    segments_made()
    os.kill(os.getpid(), signal.SIGKILL)
raise SystemExit(supervised(main, "python -m fastsample.train"))
"""
    env = {**os.environ, "PMI_RANK": "0"}
    env.pop("FASTSAMPLE_SUPERVISED", None)
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 128 + 9, proc.stderr
        assert "rank 0: killed by SIGKILL" in proc.stderr, proc.stderr
        assert not segment.exists()
    finally:
        segment.unlink(missing_ok=True)


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["killed", "exits"])
def test_a_rank_that_fails_before_mpi_starts_ends_the_job(how):
    # MPICH's launcher (and srun) wait forever for a rank that ends before MPI_Init, the others
    # held in MPI_Init: killed as it imported (the helper's kill -9 half a second in), or an error
    # only one node has (a broken install). Its supervisor now starts MPI in its place and aborts.
    code = f"""
import os, sys
from fastsample.supervisor import supervised
def main():
    if os.environ["PMI_RANK"] == "1":
        {"os.kill(os.getpid(), 9)" if how == "killed" else "print('rank 1: cannot import', file=sys.stderr); return 3"}
    from mpi4py import MPI
    MPI.COMM_WORLD.Barrier()
    return 0
raise SystemExit(supervised(main, "python -m fastsample.train"))
"""
    before = mpi_segments()
    t0 = time.monotonic()
    proc = mpiexec(2, "-c", code, timeout=60)
    assert time.monotonic() - t0 < 20, proc.stderr
    assert proc.returncode == (137 if how == "killed" else 3), proc.stdout + proc.stderr
    said = "rank 1: killed by SIGKILL in start-up" if how == "killed" else "rank 1: cannot import"
    assert said in proc.stderr and "Abort(" not in proc.stderr, proc.stderr
    assert not left_behind(before)
