"""Training end to end: identical across samplers and modes, accurate, and robust."""

import dataclasses
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import REPO, ccl_available, mpiexec, run_module, train_records
from fastsample.partition import partition_dataset
from helpers import kill_group, mpiexec_argv, native_built, train_many
from fastsample.trainer.runlog import read_records

ARGS = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--epochs", "2", "--quiet",
        "--eval-every", "0", "--threads", "1"]


def train(root, ranks, *extra, log):
    return train_records(root / f"p{ranks}", ranks, log, *ARGS, *extra)


@pytest.fixture(scope="module")
def cora(planetoid_dir, tmp_path_factory):
    """Cora through the command line (python -m fastsample.data planetoid), partitioned for 1
    (p1) and 2 ranks (cora-2): made once for the Cora tests here."""
    root = tmp_path_factory.mktemp("cora")
    run_module("fastsample.data", "planetoid", planetoid_dir, "--name", "cora", root / "cora", "--quiet", check=True)
    partition_dataset(root / "cora", root / "p1", 1, progress=False)
    partition_dataset(root / "cora", root / "cora-2", 2, progress=False)
    return root


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 3])  # 2 ranks: test_data_path.py's matrix, every kernel and mode
def test_losses_identical_across_samplers_and_modes(train_parts, tmp_path, ranks):
    variants = [("hybrid", "numba"), ("hybrid", "twostep"), ("vanilla", "numba")]
    if native_built():
        variants.append(("hybrid", "native"))
    # every variant in one launch (helpers.train_many: the command's main() per run)
    runs = train_many(train_parts / f"p{ranks}", ranks, {(mode, sampler): (tmp_path / f"{mode}-{sampler}.json",
                                                                          [*ARGS, "--mode", mode, "--sampler", sampler])
                                                         for mode, sampler in variants})
    ref = runs[("hybrid", "numba")]
    assert len(ref) == 2 and all(len(r["step_losses"]) > 1 for r in ref)
    for key, records in runs.items():
        got = [loss for r in records for loss in r["step_losses"]]
        want = [loss for r in ref for loss in r["step_losses"]]
        assert got == want, f"{key} per-step losses differ from hybrid/numba with {ranks} ranks"
        rounds = records[0]["rounds_per_step"]
        assert rounds == (2 if key[0] == "hybrid" else 2 * 2), f"{key}: {rounds} rounds per step"
        # the roofline counts the products of the MFGs rank 0 ran: the same MFGs, the same count
        assert [r["products_flop"] for r in records] == [r["products_flop"] for r in ref]
        # (a floor measured under another launch's load is none that epoch: fastsample/nn/roofline.py)
        assert ref[0]["products_flop"] > 0 and all((r["products_floor_s"] or 1) > 0 for r in records)


def test_cora_accuracy(cora, tmp_path):
    log = tmp_path / "cora.json"
    proc = run_module("fastsample.train", "--data", cora / "p1", "--fanouts", "10,10", "--batch-size", "64",
                      "--hidden", "64", "--lr", "0.01", "--weight-decay", "5e-4", "--epochs", "30", "--quiet",
                      "--log-json", log)
    assert proc.returncode == 0, proc.stderr
    records = read_records(log)
    best = max(records, key=lambda r: r["val_acc"])
    assert best["test_acc"] >= 0.78, f"test accuracy {best['test_acc']} at the best validation epoch"


PRECISIONS = {"fp32": [], "bf16": ["--precision", "bf16", "--matmul", "blas"], "int8": ["--precision", "int8"]}


@pytest.fixture(scope="module")
def readme_cora(cora, tmp_path_factory) -> dict:
    """README's Cora command, as is and with each of PRECISIONS' flags, in one launch
    (helpers.train_many: the command's main() per run): {precision: its closing line}."""
    readme = (REPO / "README.md").read_text()
    flags = "--batch-size 32 --fanouts 10,10 \\\n    --lr 0.002 --weight-decay 1e-3 --dropout 0.6 --epochs 30"
    assert f"mpiexec -n 2 python -m fastsample.train --data data/cora-2 {flags}" in readme
    logs = tmp_path_factory.mktemp("readme-cora")
    _, proc = train_many(cora / "cora-2", 2, {name: (logs / f"{name}.jsonl", [*flags.replace("\\\n", "").split(),
                                                                           "--threads", "1", *extra])
                                           for name, extra in PRECISIONS.items()}, timeout=300, output=True)
    done = [line for line in proc.stdout.splitlines() if line.startswith("done: ")]
    assert len(done) == len(PRECISIONS), proc.stdout  # one closing line a run, in the runs' order
    return dict(zip(PRECISIONS, done))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_readme_cora_command_on_two_ranks(readme_cora, precision):
    """README's Cora command (measured 0.789 here with seed 0; 0.78 leaves room for another CPU's rounding),
    and the same with bf16 products (pinned: they run even where they do not pay)."""
    best = float(readme_cora[precision].split("(test there ")[1].split(")")[0])
    assert best >= 0.78, readme_cora[precision]


@pytest.mark.mpi
def test_partition_for_another_rank_count_stops_every_rank(train_parts):
    proc = mpiexec(2, "-m", "fastsample.train", "--data", train_parts / "p3", *ARGS, timeout=120)
    assert proc.returncode != 0
    # every rank stops, one prints
    assert proc.stderr.count("partition built for 3 ranks, but the job has 2") == 1, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.mpi
def test_int8_refuses_a_non_finite_feature_on_every_rank(tmp_path):
    from conftest import make_small_dataset

    make_small_dataset(tmp_path / "ds", num_nodes=200, num_edges=800)
    features = np.load(tmp_path / "ds" / "features.npy", mmap_mode="r+")
    features[150, 2] = np.inf  # a row one rank owns: the other must stop too
    features.flush()
    partition_dataset(tmp_path / "ds", tmp_path / "p2", 2, method="random", progress=False)
    proc = mpiexec(2, "-m", "fastsample.train", "--data", tmp_path / "p2", *ARGS, "--precision", "int8", timeout=120)
    assert proc.returncode != 0
    message = "the node features: NaN or infinite values; --precision int8 needs finite features"
    assert proc.stderr.count(message) == 1 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.mpi
def test_mismatched_settings_are_reported(train_parts):
    script = ("import sys; from mpi4py import MPI; from fastsample.train import main; "
              "sys.exit(main(sys.argv[1:] + ['--lr', str(0.01 * (1 + MPI.COMM_WORLD.Get_rank()))]))")
    proc = mpiexec(2, "-c", script, "--data", train_parts / "p2", *ARGS, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.count("ranks were started with different lr") == 1, proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("prefetch", ["0", "1"])
def test_killing_a_rank_ends_the_job(train_parts, tmp_path, prefetch):
    log = tmp_path / "kill.json"
    job = subprocess.Popen(mpiexec_argv(2, "-m", "fastsample.train", "--data", train_parts / "p2",
                                        "--log-json", log, *ARGS, "--epochs", "1000", "--prefetch", prefetch),
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (log.exists() and '"step_losses"' in log.read_text()) and time.time() < deadline:
            time.sleep(0.5)
        assert log.exists(), "the job never finished an epoch"
        pids = subprocess.run(["pgrep", "-f", f"fastsample.train --data {train_parts / 'p2'}"], capture_output=True,
                              text=True).stdout.split()
        ranks = [p for p in pids if int(p) != job.pid]
        assert ranks, "no rank processes found"
        os.kill(int(ranks[-1]), signal.SIGKILL)
        try:
            code = job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_group(job)  # mpiexec and every rank, before reading what they printed
            out, err = job.communicate()
            pytest.fail(f"the job still ran 60 s after rank process {ranks[-1]} was killed:\n"
                        f"{out.decode(errors='replace')}{err.decode(errors='replace')}", pytrace=False)
        assert code != 0, "a job that lost a rank must fail"
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)


@pytest.mark.mpi
@pytest.mark.slow
def test_resumed_run_continues_with_the_same_losses(train_parts, tmp_path):
    # the uninterrupted run and the first half in one launch (helpers.train_many); the resume
    # starts a process of its own, as a resumed job would
    full = train_many(train_parts / "p2", 2, {
        "full": (tmp_path / "full.json", [*ARGS, "--epochs", "4", "--checkpoint-dir", tmp_path / "a"]),
        "first": (tmp_path / "first.json", [*ARGS, "--epochs", "2", "--checkpoint-dir", tmp_path / "b"])})["full"]
    # resumed with prefetch, which must not change a loss either
    resumed = train(train_parts, 2, "--epochs", "4", "--checkpoint-dir", tmp_path / "b", "--resume",
                    "--prefetch", "1", log=tmp_path / "second.json")
    assert [r["epoch"] for r in resumed] == [2, 3]
    assert [r["step_losses"] for r in resumed] == [r["step_losses"] for r in full[2:]]
    assert np.isfinite(resumed[-1]["loss"])


def test_more_threads_than_the_pools_hold_is_one_line_not_a_crash(train_parts):
    # torch's pool took the count before the samplers' check refused it: SIGSEGV at exit
    proc = run_module("fastsample.train", "--data", train_parts / "p1", "--threads", "100000", "--epochs", "1")
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and re.search(r"threads must be in 1\.\.\d+ \(got 100000\)", last), proc.stderr


def test_a_resumed_run_trains_at_its_own_learning_rate_and_decay(train_parts, tmp_path):
    # --lr and --weight-decay may change on a resume; the loaded optimizer state kept the saved
    # ones silently (and the next checkpoint's config said otherwise)
    from fastsample.comm.local import LocalCommunicator
    from fastsample.trainer import TrainConfig, Trainer
    from fastsample.trainer.report import Reporter

    first = TrainConfig(data=str(train_parts / "p1"), fanouts=(4, 3), batch_size=40, hidden=16, epochs=1, max_steps=2,
                        threads=1, eval_every=0, matmul="blas", checkpoint_dir=str(tmp_path), quiet=True)
    Trainer(first, LocalCommunicator(), reporter=Reporter()).run()
    again = Trainer(dataclasses.replace(first, epochs=2, resume=True, lr=0.02, weight_decay=0.1),
                    LocalCommunicator(), reporter=Reporter())
    assert [(g["lr"], g["weight_decay"]) for g in again.optimizer.param_groups] == [(0.02, 0.1)]
    assert again.optimizer.state  # Adam's moments: the checkpoint's


def test_a_resume_on_other_data_is_refused_and_on_the_same_data_partitioned_otherwise_is_not(train_parts, tmp_path):
    # the model's shapes fit any graph of the same widths: a resume with another --data trained
    # the rest of the run on it, silently
    from fastsample.comm.local import LocalCommunicator
    from fastsample.data.synth import SynthConfig, write_synthetic
    from fastsample.trainer import CheckpointError, TrainConfig, Trainer
    from fastsample.trainer.report import Reporter

    first = TrainConfig(data=str(train_parts / "p1"), fanouts=(4, 3), batch_size=40, hidden=16, epochs=1, max_steps=2,
                        threads=1, eval_every=0, matmul="blas", checkpoint_dir=str(tmp_path), quiet=True)
    Trainer(first, LocalCommunicator(), reporter=Reporter()).run()
    # the dataset itself (not its partition): the same data
    again = dataclasses.replace(first, data=str(train_parts / "g"), epochs=2, resume=True)
    assert Trainer(again, LocalCommunicator(), reporter=Reporter()).start_epoch == 1
    # the same widths and classes, other edges
    write_synthetic(tmp_path / "other", SynthConfig(num_nodes=3000, avg_degree=6, num_classes=4, feature_dim=8,
                                                    train_frac=0.1, seed=9), progress=False)
    with pytest.raises(CheckpointError, match=r"epoch-0\.pt: saved training on other data \(num_edges \d+ there, "
                                              r"\d+ here\): resume on the dataset it trained on"):
        Trainer(dataclasses.replace(again, data=str(tmp_path / "other")), LocalCommunicator(), reporter=Reporter())
    # other data and other settings: the data is said first (fixing the flags met a second refusal)
    with pytest.raises(CheckpointError, match=r"saved training on other data"):
        Trainer(dataclasses.replace(again, data=str(tmp_path / "other"), hidden=32), LocalCommunicator(),
                reporter=Reporter())


@pytest.mark.mpi
@pytest.mark.slow
def test_gloo_backend_trains_like_mpi(train_parts, tmp_path):
    # the mpi and the gloo run in one launch (helpers.train_many: the command's main() per
    # run; a process starts one gloo group, so the gloo run comes last and prefetch's gets its own)
    runs = train_many(train_parts / "p2", 2, {backend: (tmp_path / f"{backend}.json", [*ARGS, "--backend", backend])
                                              for backend in ("mpi", "gloo")})
    mpi, gloo = runs["mpi"], runs["gloo"]
    # prefetch on gloo: the loader's collectives on a process group of their own
    gloo_prefetch = train(train_parts, 2, "--backend", "gloo", "--prefetch", "1", log=tmp_path / "gloo-pf.json")
    a = np.array([x for r in mpi for x in r["step_losses"]])
    b = np.array([x for r in gloo for x in r["step_losses"]])
    # gloo's ring all-reduce may sum in another order than MPI: equal to float rounding
    assert np.allclose(a, b, rtol=1e-4, atol=1e-6), np.abs(a - b).max()
    assert [r["step_losses"] for r in gloo_prefetch] == [r["step_losses"] for r in gloo]
    assert gloo[0]["rounds_per_step"] == gloo_prefetch[0]["rounds_per_step"] == 2


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(not ccl_available(), reason="fastsample built without oneCCL (scripts/install-ccl.sh)")
def test_ccl_backend_trains_cora_like_mpi(cora, tmp_path):
    flags = ["--batch-size", "32", "--fanouts", "10,10", "--epochs", "3", "--quiet", "--threads", "1"]
    # the three runs in one launch (train_many: the command's main() per run, start-up paid once)
    runs = train_many(cora / "cora-2", 2, {
        name: (tmp_path / f"{name}.json", [*flags, *extra])
        for name, extra in (("mpi", ["--backend", "mpi"]), ("ccl", ["--backend", "ccl"]),
                            ("ccl-prefetch", ["--backend", "ccl", "--prefetch", "1"]))})
    losses = {name: np.array([x for r in records for x in r["step_losses"]]) for name, records in runs.items()}
    assert len(losses["mpi"]) == 9  # 3 epochs of 3 steps
    # two ranks: the all-reduce adds two numbers, in either order the same
    assert np.array_equal(losses["ccl"], losses["mpi"]), np.abs(losses["ccl"] - losses["mpi"]).max()
    assert np.array_equal(losses["ccl-prefetch"], losses["mpi"])


@pytest.mark.mpi
def test_ccl_without_the_binding_is_one_clear_line(train_parts):
    script = ("import sys; sys.modules['fastsample._ccl'] = None; from fastsample.train import main; "
              "sys.exit(main(sys.argv[1:]))")
    proc = mpiexec(2, "-c", script, "--data", train_parts / "p2", *ARGS, "--backend", "ccl", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == ("python -m fastsample.train: error: --backend ccl: fastsample was built without oneCCL; "
                           "install it with scripts/install-ccl.sh (the oneccl-cpu wheels, then a rebuild of "
                           "fastsample with FASTSAMPLE_CCL_ROOT set), or use --backend mpi or gloo\n"), proc.stderr


@pytest.mark.mpi
def test_missing_part_stops_a_vanilla_job_without_hanging(train_parts, tmp_path):
    import shutil

    copy = tmp_path / "p2"
    shutil.copytree(train_parts / "p2", copy)
    shutil.rmtree(copy / "part-1")
    proc = mpiexec(2, "-m", "fastsample.train", "--data", copy, "--mode", "vanilla", *ARGS, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.count("part-1: missing") == 1 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_reduced_precision_losses_identical_across_modes_cache_and_prefetch(train_parts, tmp_path):
    # --precision bf16 narrows the features once, int8 quantizes them once; every data path
    # (hybrid and vanilla gathers, the hot-feature cache, the prefetch thread) must then move
    # the same rows, so the losses agree bitwise. int8's prefetch thread decodes the rows into
    # one float32 matrix where the others read the 8-bit rows in place: the same losses say
    # that the kernels' sums over 8-bit rows are the sums of the decoded values. Both differ
    # from fp32's (the features are random floats) by the rounding only, int8 from bf16's too.
    variants = {"hybrid": ["--mode", "hybrid"], "vanilla": ["--mode", "vanilla"],
                "cache+prefetch": ["--mode", "hybrid", "--cache-fraction", "0.2", "--prefetch", "1"]}
    # the seven runs in one launch (helpers.train_many: the command's main() per run)
    runs = train_many(train_parts / "p2", 2, {(p, name): (tmp_path / f"{p}-{name}.json",
                                                          [*ARGS, "--precision", p, *extra])
                                              for p in ("bf16", "int8") for name, extra in variants.items()}
                      | {("fp32", "hybrid"): (tmp_path / "fp32.json", ARGS)})
    losses = {key: [loss for r in records for loss in r["step_losses"]] for key, records in runs.items()}
    fp32 = losses.pop(("fp32", "hybrid"))
    for p in ("bf16", "int8"):
        assert losses[p, "vanilla"] == losses[p, "hybrid"] and losses[p, "cache+prefetch"] == losses[p, "hybrid"], p
        assert losses[p, "hybrid"] != fp32
        np.testing.assert_allclose(losses[p, "hybrid"], fp32, rtol=1e-2)
    assert losses["int8", "hybrid"] != losses["bf16", "hybrid"]


def test_start_up_line_names_precision_and_matmul(train_parts, tmp_path):
    cases = ((["--precision", "bf16", "--matmul", "blas"], "precision bf16, matmul bf16 products (set)"),
             (["--matmul", "blas"], "precision fp32, matmul fp32 blas (set)"))
    # both runs in one process (helpers.train_many: the command's main() per run), each its own start-up line
    _, proc = train_many(train_parts / "p1", 1, {i: (tmp_path / f"{i}.jsonl", [*ARGS, "--epochs", "1", *flags])
                                                 for i, (flags, _) in enumerate(cases)}, output=True)
    started = [line for line in proc.stdout.splitlines() if line.startswith("  ") and " precision " in line]
    assert len(started) == len(cases), proc.stdout
    for line, (_, says) in zip(started, cases):
        assert says in line, proc.stdout


def test_a_user_model_named_from_another_directory_is_the_same_model_on_resume(tmp_path):
    # a resume from another directory with the file's absolute path was refused as "saved with
    # different model (models/mean.py:build there, /abs/models/mean.py:build here)"
    from fastsample.trainer.checkpoint import _same_model_file

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mean.py").write_text("")
    here = f"{tmp_path / 'models' / 'mean.py'}:build"
    assert _same_model_file("models/mean.py:build", here, str(tmp_path))
    assert not _same_model_file("models/mean.py:other", here, str(tmp_path))
    assert not _same_model_file("models/mean.py:build", here, str(tmp_path / "models"))
    assert not _same_model_file("sage", "rgat", str(tmp_path))
