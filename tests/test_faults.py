"""The faults a long job meets (issue 29): two writers on one output, a truncated newest
checkpoint, checkpoints that pile up, a loss that turns NaN. Each ends in one clear line
and leaves no half-written file or stray temporary behind."""

import contextlib
import json
import math
import os
import re
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
from helpers import REPO, mpiexec, run_commands, train_many, train_records
from fastsample.trainer.runlog import read_records, read_runs

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
    # the uninterrupted run and the one that leaves the checkpoints, in one launch (helpers.train_many)
    runs = train_many(p2 / "p2", 2, {"full": (tmp_path / "full.jsonl", [*ARGS, "--epochs", "4"]),
                                     "a": (tmp_path / "a.jsonl", [*ARGS, "--epochs", "3", "--checkpoint-dir", ck])})
    full = runs["full"]
    newest = ck / "epoch-2.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a crash while copying, a full disk
    # a checkpoint copied under a later name: its name decided where the run went on (epoch 3,
    # from epoch 1's weights), and the run then overwrote the good checkpoints after it
    shutil.copy(ck / "epoch-1.pt", ck / "epoch-3.pt")
    proc = mpiexec(2, "-m", "fastsample.train", "--data", p2 / "p2", *ARGS, "--epochs", "4", "--checkpoint-dir", ck,
                   "--resume", "--log-json", tmp_path / "b.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert (f"resume: from {ck / 'epoch-1.pt'}; skipped {ck / 'epoch-3.pt'}: holds the state of the end of epoch 1, "
            f"not what its name says (renamed or copied?); skipped {newest}: unreadable, truncated or corrupt") \
        in proc.stderr, proc.stderr
    resumed = read_records(tmp_path / "b.jsonl")
    assert [r["step_losses"] for r in resumed] == [r["step_losses"] for r in full[2:]]
    assert stray(ck) == []


@pytest.mark.mpi
def test_only_the_newest_checkpoints_are_kept(p2, tmp_path):
    ck = tmp_path / "ck"
    # both runs in one launch (helpers.train_many: the command's main() per run)
    train_many(p2 / "p2", 2, {"a": (tmp_path / "a.jsonl", [*ARGS, "--epochs", "5", "--checkpoint-dir", ck,
                                                           "--keep-checkpoints", "2"]),
                              "b": (tmp_path / "b.jsonl", [*ARGS, "--epochs", "3", "--checkpoint-dir", tmp_path / "all",
                                                           "--keep-checkpoints", "0"])})
    assert sorted(f.name for f in ck.iterdir()) == ["epoch-3.pt", "epoch-4.pt"]
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
    # the stopped run and the skipping one in one launch (helpers.run_commands: each its own status and output)
    proc, skipping, diverged = run_commands(2, [
        ("fastsample.train", ["--data", bad, *ARGS, "--epochs", "3", "--checkpoint-dir", ck]),
        ("fastsample.train", ["--data", bad, *ARGS, "--epochs", "2", "--on-nan", "skip", "--log-json",
                              tmp_path / "skip.jsonl"]),
        # the first update makes every weight inf: every later step skipped
        ("fastsample.train", ["--data", p2 / "p2", *ARGS, "--epochs", "2", "--lr", "1e30", "--on-nan", "skip",
                              "--log-json", tmp_path / "diverged.jsonl"])], tmp_path / "out")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "python -m fastsample.train: error: non-finite loss at epoch 0, step " in lines[0]
    assert "stopped before updating, no checkpoint was written yet (--on-nan skip or continue" in lines[0]
    assert skipping.returncode == 0, skipping.stdout + skipping.stderr
    skipped = read_records(tmp_path / "skip.jsonl")
    steps = [x for r in skipped for x in r["step_losses"]]
    first_nan = next(i for i, x in enumerate(steps) if x is None)  # NaN is written null: JSON has none
    # no update from a NaN step: the weights stay finite, so later steps are finite again
    assert any(x is not None and math.isfinite(x) for x in steps[first_nan:])
    assert all(math.isfinite(r["loss"]) for r in skipped)

    # an epoch whose every step was skipped has no mean loss: it was reported as a perfect 0.0000
    assert diverged.returncode == 0, diverged.stderr
    last = read_records(tmp_path / "diverged.jsonl")[-1]
    assert set(last["step_losses"]) == {None} and last["loss"] is None and last["train_acc"] is None, last
    assert "epoch   1  loss nan" in diverged.stdout, diverged.stdout

    def strict(constant):  # what jq and other strict readers do with a bare NaN
        raise ValueError(f"not JSON: {constant}")
    for line in (tmp_path / "skip.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=strict)


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


def _trains(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    except OSError:
        return False
    return "fastsample.train" in cmdline and "mpiexec" not in cmdline


def is_rank(pid: int) -> bool:
    """Whether ``pid`` is a rank: the child its supervisor forked (fastsample/supervisor.py)."""
    try:
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return _trains(pid) and _trains(parent)


def past_first_epoch(argv, log: Path, timeout: float) -> subprocess.Popen:
    """A training job started from ``argv``, once its first epoch is in ``log`` (so that a
    signal now lands mid-run); it must still be running."""
    job = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while (not log.exists() or '"step_losses"' not in log.read_text()) and job.poll() is None and \
            time.time() < deadline:  # an epoch's record (the run's header comes first)
        time.sleep(0.02)
    time.sleep(0.2)
    assert job.poll() is None, "the run ended before the signal"
    return job


@pytest.fixture(scope="module")
def longer(tmp_path_factory):
    root = tmp_path_factory.mktemp("preempt")
    write_synthetic(root / "g", SynthConfig(num_nodes=6000, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.3, seed=5), progress=False)
    partition_dataset(root / "g", root / "p2", 2, progress=False)
    return root / "p2"


# the training controls (issue 54): a schedule, its warm-up and clipping continue exactly
CONTROLS = ("--lr-schedule", "cosine", "--warmup-steps", "30", "--grad-clip", "0.5")
SIGTERM_CASES = [("hybrid", "0", "mpiexec", ()), ("vanilla", "0", "one rank", ()), ("hybrid", "1", "one rank", ()),
                 ("hybrid", "0", "one rank", CONTROLS)]


def sigterm_args(mode: str, prefetch: str, extra=()) -> list[str]:
    return [*ARGS, "--epochs", "25", "--mode", mode, "--prefetch", prefetch, *extra]


@pytest.fixture(scope="module")
def uninterrupted(longer, tmp_path_factory) -> dict:
    """The uninterrupted run of each SIGTERM_CASES (mode, prefetch), all in one launch
    (helpers.train_many); the stopped and the resumed runs start processes of their own."""
    root = tmp_path_factory.mktemp("uninterrupted")
    return train_many(longer, 2, {(m, p, x): (root / f"{m}-{p}-{len(x)}.jsonl", sigterm_args(m, p, x))
                                  for m, p, _, x in SIGTERM_CASES})


@pytest.mark.mpi
@pytest.mark.parametrize("mode, prefetch, target, extra", SIGTERM_CASES)
def test_sigterm_stops_at_a_step_and_resume_continues_bitwise(longer, uninterrupted, tmp_path, mode, prefetch, target,
                                                             extra):
    # a real SIGTERM to mpiexec (it forwards it to every rank) or to one rank alone: every
    # rank finishes the same step, a checkpoint resumes there, exit 75 with one line; the
    # resumed run's per-step losses continue the uninterrupted run's (same arguments) exactly
    from helpers import mpiexec_argv

    args = sigterm_args(mode, prefetch, extra)
    full = uninterrupted[(mode, prefetch, extra)]
    if extra:  # the controls act: not the plain run's losses
        assert full[0]["step_losses"] != uninterrupted[(mode, prefetch, ())][0]["step_losses"]
    ck, log = tmp_path / "ck", tmp_path / "a.jsonl"
    argv = mpiexec_argv(2, "-m", "fastsample.train", "--data", longer, *args, "--checkpoint-dir", ck, "--log-json", log)
    job = past_first_epoch(argv, log, timeout=120)
    ranks = [p for p in descendants(job.pid) if is_rank(p)]
    assert len(ranks) == 2, ranks
    os.kill(job.pid if target == "mpiexec" else ranks[-1], signal.SIGTERM)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 75, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("python -m fastsample.train: stopped by ") and \
        "run the same command with --resume to continue from there" in lines[0], err
    assert "stopped by SIGTERM before epoch" in lines[0] or "stopped by a signal to another rank" in lines[0]
    first = read_records(log)
    resumed = train_records(longer, 2, log, *args, "--checkpoint-dir", ck, "--resume")[len(first):]
    steps = lambda records: [x for r in records for x in r["step_losses"]]
    assert steps(first + resumed) == steps(full)
    # into the same --log-json, the resumed part goes on as the same run
    (run,) = read_runs(log)
    assert len(run.records) == len(first + resumed) and len(run.headers) == 2 and run.headers[0]["resumed"] is None
    assert run.headers[1]["run_id"] == run.run_id and run.headers[1]["resumed"] == (
        {"epoch": first[-1]["epoch"] + 1, "step": 0} if first[-1]["complete"] else
        {"epoch": first[-1]["epoch"], "step": first[-1]["first_step"] + first[-1]["steps"]})
    assert stray(ck) == [] and len(list(ck.iterdir())) <= 3
    # the two parts of the cut epoch say which steps they cover, and count rounds per step run
    cut, rest = first[-1], resumed[0]
    if cut["complete"]:  # the stop landed on an epoch's last step (1 in ~22): nothing was cut
        return
    assert rest["first_step"] == cut["first_step"] + cut["steps"] > 0
    assert cut["steps"] + rest["steps"] == rest["steps_per_epoch"] == full[0]["steps"]
    if prefetch == "0":  # with prefetch, the cut part also counts the rounds of batches fetched ahead
        assert cut["rounds_per_step"] == rest["rounds_per_step"] == full[0]["rounds_per_step"]


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
        assert len(ours) == 1 and "error: rank 0, in a checkpoint save (epoch " in ours[0], proc.stderr
        assert f"): {disk / 'ck'}: no space left for epoch-" in ours[0], proc.stderr
        assert "the checkpoints before it are intact" in ours[0]
        left = sorted(f.name for f in (disk / "ck").iterdir())
        assert left and all(n.startswith("epoch-") and n.endswith(".pt") for n in left), left
        # inference's output is checked before the inference runs: one line, nothing written
        proc = mpiexec(2, "-m", "fastsample.infer", "--data", p2 / "p2", "--checkpoint", disk / "ck" / left[-1],
                       "--out", disk / "emb")
        assert proc.returncode == 2, proc.stderr
        assert f"python -m fastsample.infer: error: rank 0, in start-up checks: {disk}: no space left for emb: needs " \
            in proc.stderr
        assert sorted(f.name for f in disk.iterdir()) == ["ck"]


# --- issue 37 (points 10, 11): a checkpoint is a set; one job per checkpoint directory ----

TYPED = ["--fanouts", "4,3", "--hidden", "16", "--threads", "1", "--quiet", "--eval-every", "0", "--embed-dim", "8"]
# 15 steps an epoch; epochs enough that the job still runs when the signal comes, 0.2 s after
# its first epoch (at 6, a ~30 % faster step let it finish first: past_first_epoch)
TASKS = {"node": ["--batch-size", "40", "--epochs", "12"],
         "link": ["--task", "link", "--negatives", "2", "--batch-size", "200", "--epochs", "5"]}  # 13


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """hetero-tiny (its institutes featureless: learnable embeddings, a shard per rank)
    partitioned for 2 ranks (node), and with its author-paper edges split (link)."""
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

    root = tmp_path_factory.mktemp("typed-faults")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    partition_dataset(root / "h", root / "node", 2, progress=False)
    proc = run_module("fastsample.data", "link-split", root / "h", root / "hl", "--negatives", "10", "--relation",
                      "author,rev_written_by,paper", "--quiet")
    assert proc.returncode == 0, proc.stderr
    partition_dataset(root / "hl", root / "link", 2, progress=False)
    return root


@pytest.fixture(scope="module")
def typed_full(typed, tmp_path_factory) -> dict:
    """{task: (the uninterrupted run's records, its checkpoint directory)} for TASKS, both
    runs in one launch (helpers.train_many); the tests copy a directory before they harm it."""
    root = tmp_path_factory.mktemp("typed-full")
    runs = train_many(None, 2, {task: (root / f"{task}.jsonl", [*TYPED, *more, "--checkpoint-dir", root / f"{task}-ck"],
                                       typed / task) for task, more in TASKS.items()})
    return {task: (records, root / f"{task}-ck") for task, records in runs.items()}


def same_state(a, b) -> bool:
    """Two checkpoint contents are bitwise equal (tensors, dicts, lists, values); shards'
    tokens (one per save) aside."""
    import torch

    if isinstance(a, dict):
        keys = set(a) - {"token"}
        return isinstance(b, dict) and keys == set(b) - {"token"} and all(same_state(a[k], b[k]) for k in keys)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same_state, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return a == b


@pytest.mark.mpi
def test_ctrl_c_is_one_line_per_interrupted_rank_not_tracebacks(longer, tmp_path):
    # mpiexec forwards Ctrl-C to every rank: each printed a KeyboardInterrupt traceback (and one
    # from atexit), then its supervisor "killed by SIGINT in start-up (epoch 1, step 12)"
    from helpers import mpiexec_argv

    log = tmp_path / "a.jsonl"
    job = past_first_epoch(mpiexec_argv(2, "-m", "fastsample.train", "--data", longer, *sigterm_args("hybrid", "0"),
                                        "--log-json", log), log, timeout=120)
    os.kill(job.pid, signal.SIGINT)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 130, err
    ours = [line for line in err.splitlines() if line.startswith("python -m fastsample.train")]
    assert ours and all(re.fullmatch(r"python -m fastsample\.train: interrupted \(SIGINT\) on rank [01], in .+ "
                                     r"\(epoch \d+, step \d+\)", line) for line in ours), err
    assert "Traceback" not in err and "killed by" not in err, err


@pytest.mark.mpi
def test_a_preemption_during_start_up_stops_at_the_first_step_and_resumes_bitwise(longer, uninterrupted, tmp_path):
    # SIGTERM while the data loads killed the rank (exit 143, "killed by SIGTERM in start-up"),
    # which train.sbatch does not requeue: the job was lost. It is now kept, and acted on as any
    # preemption: the first step done, a checkpoint there, exit 75.
    import os

    args = sigterm_args("hybrid", "0")
    ck, log = tmp_path / "ck", tmp_path / "a.jsonl"
    env = {**os.environ, "FASTSAMPLE_FAULT": "read:1:term"}  # on rank 1 as it reads the data
    proc = mpiexec(2, "-m", "fastsample.train", "--data", longer, *args, "--checkpoint-dir", ck, "--log-json", log,
                   env=env, timeout=120)
    assert proc.returncode == 75, proc.stderr
    assert "stopped by a signal to another rank" in proc.stderr, proc.stderr
    first = read_records(log)
    assert sum(r["steps"] for r in first) == 1
    resumed = train_records(longer, 2, log, *args, "--checkpoint-dir", ck, "--resume")[len(first):]
    steps = lambda records: [x for r in records for x in r["step_losses"]]
    assert steps(first + resumed) == steps(uninterrupted[("hybrid", "0", ())])
    # without --checkpoint-dir there is nothing to resume: not 75, which train.sbatch requeues
    # (its --resume would then fail), but SIGTERM's own status, and a line that says so
    proc = mpiexec(2, "-m", "fastsample.train", "--data", longer, *args, env=env, timeout=120)
    assert proc.returncode == 143, proc.stderr
    assert "step 1: nothing saved (no --checkpoint-dir), so a rerun starts over" in proc.stderr, proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("task", ["node", "link"])
def test_sigterm_on_typed_data_resumes_bitwise_embeddings_included(typed, typed_full, tmp_path, task):
    # typed data with a featureless type: each rank's embedding shard and its Adam state
    # (RowAdam's moments) are part of the mid-epoch checkpoint; the resumed run's per-step losses, its
    # last checkpoint (model, optimizer, every shard) equal the uninterrupted run's
    import torch

    from helpers import mpiexec_argv

    args = [*TYPED, *TASKS[task]]
    epochs = int(args[args.index("--epochs") + 1])
    ck, log = tmp_path / "ck", tmp_path / "a.jsonl"
    full, full_ck = typed_full[task]
    argv = mpiexec_argv(2, "-m", "fastsample.train", "--data", typed / task, *args, "--checkpoint-dir", ck,
                        "--log-json", log)
    job = past_first_epoch(argv, log, timeout=180)
    os.kill(job.pid, signal.SIGTERM)  # mpiexec forwards it to every rank
    out, err = job.communicate(timeout=180)
    assert job.returncode == 75, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("python -m fastsample.train: stopped by SIGTERM before epoch "), err
    first = read_records(log)
    assert len(first) < epochs
    resumed = train_records(typed / task, 2, tmp_path / "b.jsonl", *args, "--checkpoint-dir", ck, "--resume")
    steps = lambda records: [x for r in records for x in r["step_losses"]]
    assert steps(first + resumed) == steps(full)
    last = f"epoch-{epochs - 1}"
    names = [f"{last}.pt", f"{last}.embed-0-of-2.pt", f"{last}.embed-1-of-2.pt"]
    # tokens name one save's shards, the configs hold the runs' paths, progress their run ids: all else is equal
    load = lambda f: {k: v for k, v in torch.load(f, weights_only=True).items()
                      if k not in ("config", "shards", "progress")}
    assert all(same_state(load(ck / n), load(full_ck / n)) for n in names)
    assert load(ck / names[1])["optimizer"]["exp_avg"], "the shard holds the embeddings' Adam moments"
    assert stray(ck) == []


@pytest.mark.mpi
def test_a_damaged_or_missing_embedding_shard_resumes_from_the_set_before_it(typed, typed_full, tmp_path):
    # epoch-N.pt loads but one rank's shard of it does not: every rank falls back to the
    # previous complete set (the other rank's own shard is fine: they decide alike), with
    # one line; the resumed epoch's losses are the uninterrupted run's. The uninterrupted
    # node run's checkpoints (epochs 3..5), a copy per harm; both resumes in one launch
    # (helpers.train_many), each from checkpoints another process wrote
    args = [*TYPED, *TASKS["node"]]
    full, full_ck = typed_full["node"]
    last = len(full) - 1
    harms = {}
    for harm, shard, why in (("truncate", 1, "unreadable, truncated or corrupt ("),
                             ("remove", 0, f"missing: epoch-{last}.pt has no embedding shard for rank 0 of 2")):
        ck = tmp_path / harm
        shutil.copytree(full_ck, ck)
        bad = ck / f"epoch-{last}.embed-{shard}-of-2.pt"
        if harm == "truncate":
            bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
        else:
            bad.unlink()
        harms[harm] = (ck, f"fastsample.train: resume: from {ck / f'epoch-{last - 1}.pt'}; skipped {bad}: {why}")
    runs, proc = train_many(typed / "node", 2, {harm: (tmp_path / f"{harm}.jsonl", [*args, "--checkpoint-dir", ck,
                                                                                    "--resume"])
                                                for harm, (ck, _) in harms.items()}, output=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == len(harms), proc.stderr  # one line a resume
    for line, (harm, (ck, says)) in zip(lines, harms.items()):
        assert line.startswith(says) and line.count("skipped") == 1, proc.stderr
        assert [r["step_losses"] for r in runs[harm]] == [full[last]["step_losses"]]
        assert stray(ck) == []


def test_a_shard_of_another_save_or_job_size_is_not_taken_for_the_checkpoints(tmp_path):
    # epoch-N.pt names its shards: a loadable shard of another save of the epoch (a crash
    # between the shards and epoch-N.pt) is skipped; a job of another size finds no set
    import torch

    from fastsample.distributed.embedding import ShardedEmbeddings
    from fastsample.trainer import CheckpointError, Checkpoints, TrainConfig

    def parts(num_parts):  # 2 node types, the second featureless, split over num_parts ranks
        runs = np.cumsum([0] + [5, 7] * num_parts)
        return ShardedEmbeddings(runs, 0, num_parts, ["a", "b"], ["b"], 4, 0.1, seed=0)

    config = TrainConfig(data="d", fanouts=(3, 2), hidden=8, epochs=5, checkpoint_dir=str(tmp_path), keep_checkpoints=0)
    model = torch.nn.Linear(2, 2)
    opt, emb = torch.optim.Adam(model.parameters()), parts(1)
    saved = {}
    for epoch in range(3):
        with torch.no_grad():
            emb.tables["b"].add_(1.0)
        saved[epoch] = emb.tables["b"].detach().clone()
        Checkpoints(tmp_path, config).save(epoch, model, opt, embeddings=emb)
    shutil.copy(tmp_path / "epoch-1.embed-0-of-1.pt", tmp_path / "epoch-2.embed-0-of-1.pt")
    again = parts(1)
    start, step, note = Checkpoints(tmp_path, config).resume(model, opt, embeddings=again)
    assert (start, step) == (2, 0) and torch.equal(again.tables["b"], saved[1])
    assert note == (f"resume: from {tmp_path / 'epoch-1.pt'}; skipped {tmp_path / 'epoch-2.embed-0-of-1.pt'}: not "
                    "epoch-2.pt's shard (left by another save of that epoch, e.g. one cut short)")
    with pytest.raises(CheckpointError) as e:
        Checkpoints(tmp_path, config).resume(model, opt, embeddings=parts(2), rank=0, num_parts=2)
    files = ", ".join(str(tmp_path / f"epoch-{n}.pt") for n in (2, 1, 0))
    assert str(e.value) == (f"resume: no complete checkpoint in {tmp_path}: {files}: saved by a job of 1 rank (an "
                            "embedding shard each), this one has 2: resume with 1 rank")


def test_the_checkpoint_directory_lock_lives_with_its_checkpoints(tmp_path):
    # start-up locks the directory; its rank-0 Checkpoints holds the lock while it lives,
    # another process is refused meanwhile, and the lock file goes with it
    import gc

    from fastsample.trainer import Checkpoints, TrainConfig
    from fastsample.trainer.checkpoint import lock_directory

    other = [sys.executable, "-c",
             f"from fastsample.atomic import Lock; Lock({str(tmp_path / '.lock')!r}, {str(tmp_path)!r})"]
    lock_directory(tmp_path)
    lock_directory(tmp_path)  # this process holds it already: fine
    ck = Checkpoints(tmp_path, TrainConfig(data="d", checkpoint_dir=str(tmp_path)))
    proc = subprocess.run(other, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0 and f"Busy: {tmp_path}: another job (process {os.getpid()} on " in proc.stderr, \
        proc.stderr
    assert (tmp_path / ".lock").exists()
    del ck
    gc.collect()
    assert stray(tmp_path) == []
    proc = subprocess.run(other, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def holding_and_stopped(args: list, ck: Path) -> tuple[subprocess.Popen, list[int]]:
    """A 2-rank python -m fastsample.train ARGS, once it holds ``ck``'s lock, its ranks
    SIGSTOPped (still running, however fast this machine is, while a second job tries):
    (the job, the ranks' pids to SIGCONT)."""
    from helpers import mpiexec_argv

    job = subprocess.Popen(mpiexec_argv(2, "-m", "fastsample.train", *args), cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    lock = ck / ".lock"
    deadline = time.time() + 120
    while not (lock.exists() and lock.read_text()) and job.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert lock.exists(), "the first job never took the lock"
    ranks = [p for p in descendants(job.pid) if is_rank(p)]
    assert len(ranks) == 2, ranks
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)
    return job, ranks


@pytest.mark.mpi
def test_a_second_link_job_on_a_held_checkpoint_dir_ends_within_seconds(typed, tmp_path):
    # a link job's trainer exchanges its edge counts while it is built: the second job's
    # rank 0 refusing the directory must end the job, not leave rank 1 in that exchange
    ck = tmp_path / "ck"
    args = ["--data", typed / "link", "--task", "link", *TYPED, "--epochs", "1", "--checkpoint-dir", ck]
    job, ranks = holding_and_stopped(args, ck)
    try:
        t0 = time.time()
        second = mpiexec(2, "-m", "fastsample.train", *args, timeout=60)
        assert time.time() - t0 < 10 and second.returncode == 2, second.stdout + second.stderr
        assert "another job (process" in second.stderr and second.stderr.count("\n") == 1, second.stderr
    finally:
        for pid in ranks:
            os.kill(pid, signal.SIGCONT)
        try:  # the first job ends as it would have (kill -9 of mpiexec left its MPI segment in /dev/shm)
            job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            job.communicate()


@pytest.mark.mpi
def test_a_second_job_on_one_checkpoint_dir_fails_at_once_and_the_first_stands(p2, tmp_path):
    # the first job holds the directory's lock from start-up to its end; a second job, new
    # or --resume, fails at start-up with one line naming it; once the first has ended, a
    # later job resumes there
    import torch

    args = [*ARGS, "--epochs", "4"]
    ck, log = tmp_path / "ck", tmp_path / "a.jsonl"
    job, ranks = holding_and_stopped(["--data", p2 / "p2", *args, "--checkpoint-dir", ck, "--log-json", log], ck)
    lock = ck / ".lock"
    try:
        holder = lock.read_text()[:64].strip()  # as Busy reads it
        # a new and a resuming second job, in one launch (helpers.run_commands: each its own status and output)
        seconds = run_commands(2, [("fastsample.train", ["--data", p2 / "p2", *args, "--checkpoint-dir", ck,
                                                         "--log-json", tmp_path / "b.jsonl", *extra])
                                   for extra in ([], ["--resume"])], tmp_path / "out")
        for second in seconds:
            assert second.returncode == 2, second.stdout + second.stderr
            assert second.stderr == (f"python -m fastsample.train: error: rank 0, in start-up checks: {ck}: another job (process {holder}) "
                                     "is writing it now; wait for it, or write somewhere else\n"), second.stderr
    finally:
        for pid in ranks:
            os.kill(pid, signal.SIGCONT)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 0, out + err
    assert [(r["epoch"], r["complete"]) for r in read_records(log)] == [(e, True) for e in range(4)]
    assert not (tmp_path / "b.jsonl").exists()
    assert sorted(f.name for f in ck.iterdir()) == ["epoch-1.pt", "epoch-2.pt", "epoch-3.pt"]
    assert all(torch.load(f, weights_only=True)["config"]["log_json"] == str(log) for f in ck.iterdir())  # the first's
    proc = mpiexec(2, "-m", "fastsample.train", "--data", p2 / "p2", *ARGS, "--epochs", "5", "--checkpoint-dir", ck,
                   "--resume")
    assert proc.returncode == 0 and f"resume: from {ck / 'epoch-3.pt'}" in proc.stdout, proc.stdout + proc.stderr
    assert stray(ck) == []
