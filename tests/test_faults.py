"""The faults a long job meets (issue 29): two writers on one output, a truncated newest
checkpoint, checkpoints that pile up, a loss that turns NaN. Each ends in one clear line
and leaves no half-written file or stray temporary behind."""

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.partition import load_partition, partition_dataset
from helpers import REPO, mpiexec, train_records

ARGS = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--threads", "1", "--quiet"]


@pytest.fixture(scope="module")
def p2(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    write_synthetic(root / "g", SynthConfig(num_nodes=1500, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.1, seed=3), progress=False)
    partition_dataset(root / "g", root / "p2", 2, progress=False)
    return root


def stray(folder) -> list[str]:
    """Hidden temporaries and locks left in ``folder``."""
    return sorted(f.name for f in folder.iterdir() if f.name.startswith("."))


def test_a_second_writer_of_one_output_fails_and_the_first_result_stands(tmp_path):
    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=60_000, avg_degree=12, seed=1), progress=False)
    first = subprocess.Popen([sys.executable, "-m", "fastsample.partition", tmp_path / "g", tmp_path / "out",
                              "--parts", "2", "--method", "metis"], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".out.lock"
    deadline = time.time() + 60
    while not lock.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert lock.exists(), "the first writer never took the lock"
    os.kill(first.pid, signal.SIGSTOP)  # still writing, however fast this machine is, while the second tries
    try:
        second = run_module("fastsample.partition", tmp_path / "g", tmp_path / "out", "--parts", "2", "--overwrite",
                            "--method", "metis")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode != 0 and "another job (process" in second.stderr and "is writing it now" in second.stderr
    assert second.stderr.count("\n") == 1, second.stderr
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert load_partition(tmp_path / "out", 0, 2).num_parts == 2
    assert stray(tmp_path) == []


@pytest.mark.mpi
def test_resume_skips_a_truncated_newest_checkpoint_and_says_so(p2, tmp_path):
    ck = tmp_path / "ck"
    full = train_records(p2 / "p2", 2, tmp_path / "full.jsonl", *ARGS, "--epochs", "4")
    train_records(p2 / "p2", 2, tmp_path / "a.jsonl", *ARGS, "--epochs", "3", "--checkpoint-dir", ck)
    newest = ck / "epoch-2.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a crash while copying, a full disk
    proc = mpiexec(2, "-m", "fastsample.train", "--data", p2 / "p2", *ARGS, "--epochs", "4", "--checkpoint-dir", ck,
                   "--resume", "--log-json", tmp_path / "b.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert f"resume: from {ck / 'epoch-1.pt'}; skipped {newest}: unreadable, truncated or corrupt" in proc.stderr
    resumed = [json.loads(line) for line in open(tmp_path / "b.jsonl")]
    assert [r["step_losses"] for r in resumed] == [r["step_losses"] for r in full[2:]]
    assert stray(ck) == []


@pytest.mark.mpi
def test_only_the_newest_checkpoints_are_kept(p2, tmp_path):
    ck = tmp_path / "ck"
    train_records(p2 / "p2", 2, tmp_path / "a.jsonl", *ARGS, "--epochs", "5", "--checkpoint-dir", ck,
                  "--keep-checkpoints", "2")
    assert sorted(f.name for f in ck.iterdir()) == ["epoch-3.pt", "epoch-4.pt"]
    train_records(p2 / "p2", 2, tmp_path / "b.jsonl", *ARGS, "--epochs", "3", "--checkpoint-dir", tmp_path / "all",
                  "--keep-checkpoints", "0")
    assert len(list((tmp_path / "all").iterdir())) == 3


@pytest.mark.mpi
def test_a_nan_loss_stops_every_rank_with_one_line_or_is_skipped(p2, tmp_path):
    bad = tmp_path / "p2"
    import shutil

    shutil.copytree(p2 / "p2", bad)
    features = np.load(bad / "part-1" / "features.npy")
    features[:2] = np.nan  # two of rank 1's rows: the batches that read them turn NaN
    np.save(bad / "part-1" / "features.npy", features)
    ck = tmp_path / "ck"
    proc = mpiexec(2, "-m", "fastsample.train", "--data", bad, *ARGS, "--epochs", "3", "--checkpoint-dir", ck)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "python -m fastsample.train: error: non-finite loss at epoch 0, step " in lines[0]
    assert "stopped before updating, no checkpoint was written yet (--on-nan skip or continue" in lines[0]
    skipped = train_records(bad, 2, tmp_path / "skip.jsonl", *ARGS, "--epochs", "2", "--on-nan", "skip")
    steps = [x for r in skipped for x in r["step_losses"]]
    first_nan = next(i for i, x in enumerate(steps) if math.isnan(x))
    # no update from a NaN step: the weights stay finite, so later steps are finite again
    assert any(math.isfinite(x) for x in steps[first_nan:]) and all(math.isfinite(r["loss"]) for r in skipped)


def test_info_check_reports_the_non_finite_feature_rows(p2, tmp_path):
    proc = run_module("fastsample.data", "info", p2 / "g", "--check")
    assert proc.returncode == 0 and "check       every feature row is finite" in proc.stdout, proc.stderr
    bad = tmp_path / "g"
    shutil.copytree(p2 / "g", bad)
    features = np.load(bad / "features.npy")
    features[700, 3], features[5, 0] = np.inf, np.nan
    np.save(bad / "features.npy", features)
    proc = run_module("fastsample.data", "info", bad, "--check")
    assert proc.returncode == 1, proc.stderr
    assert "check       features: 2 rows with NaN or inf (first: 5, 700)" in proc.stdout


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (mpiexec's proxy, then the ranks), from /proc."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def is_rank(pid: int) -> bool:
    try:
        return "fastsample.train" in Path(f"/proc/{pid}/cmdline").read_bytes().decode() and \
            "mpiexec" not in Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    except OSError:
        return False


@pytest.fixture(scope="module")
def longer(tmp_path_factory):
    root = tmp_path_factory.mktemp("preempt")
    write_synthetic(root / "g", SynthConfig(num_nodes=6000, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.3, seed=5), progress=False)
    partition_dataset(root / "g", root / "p2", 2, progress=False)
    return root / "p2"


@pytest.mark.mpi
@pytest.mark.parametrize("mode, prefetch, target", [("hybrid", "0", "mpiexec"), ("vanilla", "0", "one rank"),
                                                    ("hybrid", "1", "one rank")])
def test_sigterm_stops_at_a_step_and_resume_continues_bitwise(longer, tmp_path, mode, prefetch, target):
    # a real SIGTERM to mpiexec (it forwards it to every rank) or to one rank alone: every
    # rank finishes the same step, a checkpoint resumes there, exit 75 with one line; the
    # resumed run's per-step losses continue the uninterrupted run's exactly
    from helpers import mpiexec_argv

    args = [*ARGS, "--epochs", "25", "--mode", mode, "--prefetch", prefetch]
    full = train_records(longer, 2, tmp_path / "full.jsonl", *args)
    ck, log = tmp_path / "ck", tmp_path / "a.jsonl"
    argv = mpiexec_argv(2, "-m", "fastsample.train", "--data", longer, *args, "--checkpoint-dir", ck, "--log-json", log)
    job = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while (not log.exists() or not log.read_text()) and job.poll() is None and time.time() < deadline:
        time.sleep(0.02)  # the first epoch is done: the stop lands mid-run
    time.sleep(0.2)
    assert job.poll() is None, "the run ended before the signal"
    ranks = [p for p in descendants(job.pid) if is_rank(p)]
    assert len(ranks) == 2, ranks
    os.kill(job.pid if target == "mpiexec" else ranks[-1], signal.SIGTERM)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 75, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("python -m fastsample.train: stopped by ") and \
        "run the same command with --resume to continue from there" in lines[0], err
    assert "stopped by SIGTERM before epoch" in lines[0] or "stopped by a signal to another rank" in lines[0]
    resumed = train_records(longer, 2, tmp_path / "b.jsonl", *args, "--checkpoint-dir", ck, "--resume")
    first = [json.loads(line) for line in log.read_text().splitlines()]
    steps = lambda records: [x for r in records for x in r["step_losses"]]
    assert steps(first + resumed) == steps(full)
    assert stray(ck) == [] and len(list(ck.iterdir())) <= 3


@contextlib.contextmanager
def small_disk(path: Path, size: str):
    """A tmpfs of ``size`` at ``path`` (root only: the test is skipped elsewhere)."""
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def test_a_full_disk_is_one_line_and_leaves_nothing_behind(p2, tmp_path):
    from fastsample.atomic import DiskFull, allocated_memmap

    with small_disk(tmp_path / "disk", "512k") as disk:
        # partitioning: checked before any work (the estimate: rows, topology, ids)
        proc = run_module("fastsample.partition", p2 / "g", disk / "p2", "--parts", "2")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith(f"python -m fastsample.partition: error: {disk}: no "
                                                               "space left for p2: needs ")
        # a generator whose writes run out midway: the memory-mapped files are reserved
        # first (no SIGBUS), and the temporary directory goes
        proc = run_module("fastsample.data", "synth", disk / "g", "--preset", "small", "--quiet")
        assert proc.returncode == 2 and f"python -m fastsample.data synth: error: {disk}: no space left for g" in \
            proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        with pytest.raises(DiskFull, match=r"no space left for big.npy: needs 9.5 MiB"):
            allocated_memmap(disk / "big.npy", np.float32, (2_500_000,))
        assert sorted(f.name for f in disk.iterdir()) == []


@pytest.mark.mpi
def test_a_checkpoint_that_does_not_fit_stops_the_job_with_one_line(p2, tmp_path):
    with small_disk(tmp_path / "disk", "160k") as disk:
        proc = mpiexec(2, "-m", "fastsample.train", "--data", p2 / "p2", *ARGS, "--hidden", "256", "--epochs", "3",
                       "--checkpoint-dir", disk / "ck")
        assert proc.returncode != 0
        ours = [line for line in proc.stderr.splitlines() if "fastsample.train" in line]
        assert len(ours) == 1 and f"error: rank 0: {disk / 'ck'}: no space left for epoch-" in ours[0], proc.stderr
        assert "the checkpoints before it are intact" in ours[0]
        left = sorted(f.name for f in (disk / "ck").iterdir())
        assert left and all(n.startswith("epoch-") and n.endswith(".pt") for n in left), left
        # inference's output is checked before the inference runs: one line, nothing written
        proc = mpiexec(2, "-m", "fastsample.infer", "--data", p2 / "p2", "--checkpoint", disk / "ck" / left[-1],
                       "--out", disk / "emb")
        assert proc.returncode == 2, proc.stderr
        assert f"python -m fastsample.infer: error: rank 0: {disk}: no space left for emb: needs " in proc.stderr
        assert sorted(f.name for f in disk.iterdir()) == ["ck"]
