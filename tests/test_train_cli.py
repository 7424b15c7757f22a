"""What a user of python -m fastsample.train sees: one message per error, outputs checked
before any work, safe checkpoints, logs that read well in a file."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import mpiexec, run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.partition import partition_dataset
from fastsample.train import build_parser
from fastsample.trainer.metrics import seconds
from helpers import train_many
from fastsample.trainer.runlog import read_records, read_runs

SMALL = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--threads", "1"]


@pytest.fixture(scope="module")
def p2(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    write_synthetic(root / "g", SynthConfig(num_nodes=1500, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.1, seed=3), progress=False)
    partition_dataset(root / "g", root / "p2", 2, progress=False)
    return root / "p2"


def train2(*args, timeout=180):
    return mpiexec(2, "-m", "fastsample.train", *map(str, args), timeout=timeout)


ARGUMENT_ERRORS = [
    (["--epochs", "0"], "--epochs must be positive (got 0)"),
    (["--fanouts", "4,x"], "--fanouts: expected comma-separated integers (got '4,x')"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--net-model", "10"], "--net-model must be LATENCY_US,GBPS with GBPS > 0 (got 10.0)"),
    (["--net-model", "1,x"], "--net-model: expected LATENCY_US,GBPS, e.g. 10,25 (got '1,x')"),
    # an abbreviation is not taken for the flag it begins (allow_abbrev=False)
    (["--epoch", "3"], "unrecognized arguments: --epoch 3"),
    # a flag that would do nothing for the chosen model
    (["--heads", "8"], "--heads serves --model rgat (or a model of your own that reads config.heads), not --model sage"),
    # ... though its value is the default: the flag was typed, so its user expects it to act
    (["--heads", "4"], "--heads serves --model rgat (or a model of your own that reads config.heads), not --model sage"),
    (["--scorer", "mlp"], "--scorer serves --task link only, not --task node"),
    (["--exclude=auto"], "--exclude serves --task link, edge-class and edge-regression only, not --task node"),
    (["--early-stop", "2", "--eval-every", "0"], "--early-stop needs an evaluation every few epochs (--eval-every N > 0)"),
]
STEP_EVALUATION_ERRORS = [
    (["--eval-every-steps", "2", "--prefetch", "1"], "--eval-every-steps does not run with --prefetch"),
    (["--target-val-acc", "0.5", "--eval-every", "0"], "--target-val-acc needs an evaluation to stop at"),
]


@pytest.fixture(scope="module")
def runs(p2, tmp_path_factory) -> tuple[dict, Path]:
    """The 2-rank python -m fastsample.train runs of the tests below that stop at their
    arguments or start-up, or run one short job, all in one launch (helpers.run_commands:
    each command's exit status, stdout and stderr as its own launch would give them):
    ({name: its result}, the directory their paths are in)."""
    from helpers import run_commands

    root = tmp_path_factory.mktemp("cli-runs")
    (root / "file").write_text("not a directory")
    commands = {("arguments", i): [*SMALL, *args] for i, (args, _) in enumerate(ARGUMENT_ERRORS)}
    commands |= {("step evaluation", i): [*SMALL, *args] for i, (args, _) in enumerate(STEP_EVALUATION_ERRORS)}
    commands |= {
        "log_json": [*SMALL, "--epochs", "1", "--log-json", root / "nodir" / "x.jsonl"],
        "checkpoint_dir": [*SMALL, "--epochs", "1", "--checkpoint-dir", root / "file" / "ckpt"],
        "tensorboard": [*SMALL, "--epochs", "1", "--tensorboard", root / "file" / "tb"],
        "resume": [*SMALL, "--epochs", "1", "--checkpoint-dir", root / "ckpt", "--resume"],
        "single step": [*SMALL, "--epochs", "1", "--batch-size", "5000", "--quiet"],
        "target missed": [*SMALL, "--epochs", "1", "--target-val-acc", "1.0", "--quiet"],
        "link without a split": [*SMALL, "--task", "link", "--epochs", "1"],
        "progress lines": [*SMALL, "--epochs", "2", "--progress-every", "0.001", "--eval-every", "0"],
        "early stop": [*SMALL, "--epochs", "40", "--early-stop", "2", "--keep-checkpoints", "1", "--quiet",
                       "--checkpoint-dir", root / "es-ck", "--log-json", root / "es.jsonl"],
        "log to a file": [*SMALL, "--epochs", "3", "--log-json", root / "run.jsonl"],  # no --quiet: stderr is a file
        "log again": [*SMALL, "--epochs", "2", "--lr", "0.02", "--log-json", root / "run.jsonl"],  # into the same file
        "log not a log": [*SMALL, "--epochs", "1", "--log-json", root / "file"],
    }
    results = run_commands(2, [("fastsample.train", ["--data", p2, *args]) for args in commands.values()],
                           root / "out", timeout=300)
    return dict(zip(commands, results)), root


# ---------------------------------------------------------------- one message, every rank stops

@pytest.mark.mpi
@pytest.mark.parametrize("case", range(len(ARGUMENT_ERRORS)), ids=[" ".join(a) for a, _ in ARGUMENT_ERRORS])
def test_argument_errors_are_one_line_from_one_rank(runs, case):
    proc, message = runs[0]["arguments", case], ARGUMENT_ERRORS[case][1]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"python -m fastsample.train: error: {message} (see --help)\n", proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_cuda_is_one_line(p2):
    proc = run_module("fastsample.train", "--data", p2, "--device", "cuda")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--device cuda: no CUDA device is available" in proc.stderr


def test_help_groups_the_options_and_shows_every_default():
    parser = build_parser()
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{action.option_strings} has no help text"
        if action.default is not None and action.default is not False:
            assert "(default:" in formatter._get_help_string(action), f"{action.option_strings} hides its default"
    titles = {g.title: [a.dest for a in g._group_actions] for g in parser._action_groups}
    for title in ("data and task", "model", "sampling and distribution", "typed data", "link prediction (--task link)",
                  "performance", "checkpoints, logs and output"):
        assert titles.get(title), f"no group {title!r} in --help: {list(titles)}"
    assert titles["options"] == ["help"], f"options in no group: {titles['options']}"
    proc = run_module("fastsample.train", "--help")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    # (argparse may wrap the edge tasks' names at their hyphens)
    for said in ("(default: 15,10,5 with --task node, node-regression; 10,10 with --task link, edge",
                 "(default: 1000 with --task node, node-regression; 256 with --task link, edge", "--matmul {auto,blas,onednn}", "auto: native where it was built, else numba",
                 "(default: retain)", "Typed (heterogeneous) data is detected from the dataset",
                 "--eval does not apply (link evaluation is always exact"):
        assert said in text, said
    assert re.search(r"--matmul \{auto,blas,onednn\} [^\[]*?\(default: auto\) --net-model", text), text


def test_a_flag_left_out_takes_its_tasks_default():
    from fastsample.tasks import TASKS
    from fastsample.trainer.config import TrainConfig

    for task, defaults in ((name, t.defaults) for name, t in TASKS.items()):
        config = TrainConfig(data="d", task=task)
        assert {k: getattr(config, k) for k in defaults} == defaults
        assert config.layers == len(defaults["fanouts"])
    assert TrainConfig(data="d", task="link", batch_size=7, fanouts=(3, 2, 1)).batch_size == 7


def test_every_neighbour_is_written_as_users_write_it(capsys):
    # --fanouts -1,-1 (every neighbour): a value, not a flag (argparse took "-1,-1" for an
    # unknown flag and said "expected one argument"); a bad one is still named
    from fastsample.train import parse_args

    for argv in (["--fanouts", "-1,-1"], ["--fanouts=-1,-1"]):
        assert parse_args(["--data", "d", *argv]).fanouts == (-1, -1)
    assert parse_args(["--data", "d", "--fanouts", "-1,10,5"]).fanouts == (-1, 10, 5)
    with pytest.raises(SystemExit) as e:
        parse_args(["--data", "d", "--fanouts", "-1,x"])
    assert e.value.code == 2 and "--fanouts: expected comma-separated integers (got '-1,x')" in capsys.readouterr().err


# ---------------------------------------------------------------- output paths, checked at start-up

@pytest.mark.mpi
def test_log_json_in_a_missing_directory_fails_at_start_up(runs):
    proc, tmp_path = runs[0]["log_json"], runs[1]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (f"python -m fastsample.train: error: rank 0, in start-up checks: --log-json {tmp_path / 'nodir' / 'x.jsonl'}: "
                           f"directory {tmp_path / 'nodir'} does not exist\n"), proc.stderr
    assert "epoch" not in proc.stdout, "the check must come before any training"


@pytest.mark.mpi
def test_checkpoint_dir_that_cannot_be_created_fails_at_start_up(runs):
    proc, tmp_path = runs[0]["checkpoint_dir"], runs[1]
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"--checkpoint-dir {tmp_path / 'file' / 'ckpt'}: cannot create it" in proc.stderr
    proc = runs[0]["tensorboard"]
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"--tensorboard {tmp_path / 'file' / 'tb'}: cannot create it" in proc.stderr


@pytest.mark.mpi
def test_resume_from_a_missing_directory_does_not_create_it(runs):
    proc, missing = runs[0]["resume"], runs[1] / "ckpt"
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"checkpoint directory {missing} does not exist" in proc.stderr
    assert not missing.exists()


# ---------------------------------------------------------------- checkpoints

@pytest.mark.mpi
def test_checkpoint_carrying_a_pickled_callable_is_refused(p2, tmp_path):
    ckpt = tmp_path / "ckpt"
    proc = train2("--data", p2, *SMALL, "--epochs", "1", "--quiet", "--checkpoint-dir", ckpt)
    assert proc.returncode == 0, proc.stderr
    state = torch.load(ckpt / "epoch-0.pt", weights_only=True)  # what we write loads safely
    assert set(state) == {"epoch", "model", "optimizer", "config", "progress", "products", "dataset", "cwd"}  # progress: the run id

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    state["config"]["hidden"] = Payload()
    torch.save(state, ckpt / "epoch-0.pt")
    proc = train2("--data", p2, *SMALL, "--epochs", "2", "--checkpoint-dir", ckpt, "--resume")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{ckpt / 'epoch-0.pt'}: refused: not a plain checkpoint" in proc.stderr
    assert "system" in proc.stderr, proc.stderr
    assert not (tmp_path / "pwned").exists(), "the payload must never run"


# ---------------------------------------------------------------- logs

@pytest.mark.mpi
def test_log_to_a_file_has_no_progress_bar_and_ends_with_a_summary(runs):
    proc, log = runs[0]["log to a file"], runs[1] / "run.jsonl"  # no --quiet: stderr is a file
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout + proc.stderr, "a progress bar was drawn into a file"
    lines = proc.stdout.splitlines()
    # two start-up lines: what is trained (task, model and its shape, fanouts, batch, lr), how it runs
    assert lines[0].startswith("fastsample.train: ") and lines[1].startswith("  2 ranks x "), lines[:2]
    assert "task node (eval sampled every 1 epochs)" in lines[0], lines[0]  # how val/test are measured
    assert "model sage (GraphSAGE, hidden 16, 2 layers), fanouts [4, 3], batch 40/rank (80 global), lr " in lines[0]
    assert "sampler native" in lines[1] or "sampler numba" in lines[1], lines[1]
    assert "sampler auto" not in lines[1] and "GFLOP/s" not in lines[1]
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert len(epochs) == 3 and all("MiB (rank 0, this epoch)" in e for e in epochs), epochs
    assert all(" (sampled)  " in e for e in epochs), epochs
    assert all(" 0.0s" not in e and "(sample 0.0 " not in e for e in epochs), epochs
    records = read_records(log)[:3]  # the first run's ("log again" appends a second)
    best = max(records, key=lambda r: r["val_acc"])
    mean = seconds(sum(r["epoch_s"] for r in records) / 3)
    assert lines[-1] == (f"done: epochs 0..2, best val {best['val_acc']:.4f} at epoch {best['epoch']} "
                         f"(test there {best['test_acc']:.4f}), mean epoch {mean}"), lines[-1]


@pytest.mark.mpi
def test_two_runs_into_one_log_read_back_as_two_runs_with_their_settings(runs):
    # each run opens with a header (its id, resolved settings, data, host, versions); a
    # second run appends after the first, and says so
    again, log = runs[0]["log again"], runs[1] / "run.jsonl"
    assert again.returncode == 0, again.stdout + again.stderr
    first, second = read_runs(log)
    assert first.run_id != second.run_id
    assert [len(first.records), len(second.records)] == [3, 2]
    assert [r.epoch for r in second.records] == [0, 1]
    assert (first.config["epochs"], second.config["epochs"], second.config["lr"]) == (3, 2, 0.02)
    assert isinstance(first.config["lr"], float) and first.config["lr"] != 0.02  # resolved: the task's default
    assert first.config["fanouts"] == [4, 3] and first.config["data"] == second.config["data"]
    head = second.header
    assert head["data"]["kind"] == "partition" and len(head["data"]["digest"]) == 16 and head["data"]["nodes"] == 1500
    assert head["data"]["digest"] == first.header["data"]["digest"]
    assert head["job"]["ranks"] == 2 and head["host"]["cpu"] and head["versions"]["torch"] == torch.__version__
    assert head["versions"]["mpi"] and (head["git"] is None or len(head["git"]["commit"]) == 40)
    assert f"fastsample.train: log: run {second.run_id} appended in {log}, after 1 other run(s)" in again.stdout
    # and a file that is not a log is refused at start-up
    bad = runs[0]["log not a log"]
    assert bad.returncode == 2 and "holds something else than a --log-json file's runs" in bad.stderr, bad.stderr


@pytest.mark.mpi
def test_single_step_epochs_are_warned_about(runs):
    proc = runs[0]["single step"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning: an epoch is a single step") == 1, proc.stderr


@pytest.mark.mpi
def test_a_missed_target_is_exit_status_5_with_one_line(runs):
    # MLPerf counts a run that ends before its target as failed: jobs/mlperf_rgat.sh exits with it
    proc = runs[0]["target missed"]
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert proc.stderr == "python -m fastsample.train: target val acc 1.0 not reached in epochs 0..0\n", proc.stderr
    assert "target val acc 1.0 not reached" in proc.stdout.splitlines()[-1]


@pytest.mark.mpi
def test_early_stopping_ends_after_patience_and_keeps_the_best_epochs_checkpoint(runs):
    proc, root = runs[0]["early stop"], runs[1]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = read_records(root / "es.jsonl")
    scores = [r["val_acc"] for r in records]
    best = scores.index(max(scores))  # the first epoch at the best score: a tie is no improvement
    assert len(records) < 40 and records[-1]["epoch"] == best + 2, scores  # two evaluations without a better one
    assert [r["stopped_early"] for r in records] == [False] * (len(records) - 1) + [True]
    # the newest (--keep-checkpoints 1) and the best epoch's
    assert sorted(f.name for f in (root / "es-ck").iterdir()) == sorted({f"epoch-{best}.pt", f"epoch-{best + 2}.pt"})
    assert proc.stdout.splitlines()[-1].endswith(f"; stopped early: no better val_acc than epoch {best}'s "
                                                 f"{scores[best]:.4f} for the last 2 epochs, epoch-{best}.pt kept"), \
        proc.stdout


@pytest.mark.mpi
def test_early_stopping_resumed_mid_patience_stops_where_the_whole_run_did(runs, p2):
    # the patience counter is saved with each checkpoint: a run cut one evaluation after its
    # best epoch and resumed stops one epoch later, as the whole run did, with the same scores
    root = runs[1]
    whole = read_records(root / "es.jsonl")
    best = [r["val_acc"] for r in whole].index(max(r["val_acc"] for r in whole))
    args = [*SMALL, "--early-stop", "2", "--keep-checkpoints", "1", "--quiet", "--checkpoint-dir", root / "es2-ck"]
    log = root / "es2.jsonl"
    cut = train_many(p2, 2, {"cut": (log, [*args, "--epochs", str(best + 2)])})["cut"]
    assert not cut[-1]["stopped_early"] and len(cut) == best + 2
    resumed = train_many(p2, 2, {"resumed": (log, [*args, "--epochs", "40", "--resume"])})["resumed"][len(cut):]
    assert [r["epoch"] for r in resumed] == [best + 2] and resumed[0]["stopped_early"]
    # the best epoch is the cut run's: named (the closing line named the resumed run's best)
    assert resumed[0]["early_best"] == {"epoch": best, "score": max(r["val_acc"] for r in whole),
                                        "kept": f"epoch-{best}.pt"}
    assert [r["val_acc"] for r in cut + resumed] == [r["val_acc"] for r in whole]
    assert sorted(f.name for f in (root / "es2-ck").iterdir()) == sorted({f"epoch-{best}.pt", f"epoch-{best + 2}.pt"})
    # resumed again, a run that stopped early trained one more epoch: it says it is over
    again = mpiexec(2, "-m", "fastsample.train", "--data", p2, *args, "--epochs", "40", "--resume")
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and \
        f"the run stopped early after epoch {best + 2} (no better score than epoch {best}'s for 2 evaluations, " \
        "--early-stop 2): raise --early-stop to train on" in again.stderr, again.stderr


@pytest.mark.mpi
def test_progress_into_a_pipe_is_timed_lines_from_rank_0(runs):
    # under mpiexec rank 0's stderr is a pipe: no bar, a line every --progress-every seconds
    # (none before the first interval, so a short run says nothing)
    proc = runs[0]["progress lines"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    steps = int(re.search(r"(\d+) steps/epoch", proc.stdout).group(1))
    assert "\r" not in proc.stderr and len(lines) == 2 * (steps - 1), proc.stderr  # every step but each epoch's first
    for line in lines:
        assert re.fullmatch(r"epoch [01] step \d+/\d+  \d+\.\d\d steps/s  ETA [\d.]+m?s  loss \d\.\d{4}", line), line
    assert not runs[0]["log to a file"].stderr  # the default interval, 60 s: nothing in a short run


@pytest.mark.mpi
def test_link_on_a_partition_without_a_split_names_both_steps(runs, p2):
    proc = runs[0]["link without a split"]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (f"python -m fastsample.train: error: rank 0, in reading the data: {p2}: no edge split (make "
                           "one: python -m fastsample.data link-split DATASET OUT, then partition OUT: python -m "
                           "fastsample.partition OUT OUT-P --parts P, and train on that)\n"), proc.stderr


@pytest.mark.parametrize("module, args, flag", [
    ("fastsample.partition", ["G", "OUT", "--parts", "2", "--meth", "random"], "--meth random"),
    ("fastsample.data", ["synth", "OUT", "--pres", "tiny"], "--pres tiny"),
    ("fastsample.infer", ["--data", "D", "--checkpoint", "C", "--out", "O", "--batch", "8"], "--batch 8"),
    ("fastsample.plan", ["--nodes", "1000", "--edg", "5"], "--edg 5")])
def test_every_command_refuses_an_abbreviated_flag(module, args, flag):
    proc = run_module(module, *args)
    assert proc.returncode == 2 and f"unrecognized arguments: {flag}" in proc.stderr, proc.stderr


def test_seconds_reads_well():
    assert [seconds(t) for t in (0.00321, 0.0456, 0.64, 1.0, 12.345, 125.2, float("nan"))] == \
        ["3.2ms", "46ms", "640ms", "1.00s", "12.35s", "2m05s", "?"]


def test_a_resumed_part_of_an_epoch_says_its_steps_and_is_not_a_mean_epoch():
    from fastsample.trainer.metrics import EpochRecord, report_line, summary

    whole = EpochRecord(epoch=0, loss=1.0, train_acc=0.5, metrics={"val_acc": 0.6, "test_acc": 0.6}, epoch_s=2.0, steps=10,
                        steps_per_epoch=10, rounds_per_step=2)
    rest = EpochRecord(epoch=1, loss=1.0, train_acc=0.5, metrics={"val_acc": 0.7, "test_acc": 0.7}, epoch_s=0.3, steps=3,
                       steps_per_epoch=10, first_step=7, rounds_per_step=2)
    cut = EpochRecord(epoch=2, loss=1.0, train_acc=0.5, epoch_s=0.1, steps=4, steps_per_epoch=10, complete=False)
    assert report_line(rest).startswith("epoch   1 (steps 7..9 of 10, resumed)  loss")
    assert report_line(cut).startswith("epoch   2 (steps 0..3 of 10, stopped)  loss")
    assert report_line(whole).startswith("epoch   0  loss") and report_line(whole).endswith("2 rounds/step")
    assert summary([whole, rest, cut]).endswith("mean epoch 2.00s")
    assert summary([rest]).endswith("mean epoch n/a (no whole epoch in this run)")


@pytest.mark.parametrize("module, args", [("fastsample.train", ["--data", "x", "--epochs", "0"]),
                                          ("fastsample.infer", ["--data", "x", "--checkpoint", "c", "--out", "o",
                                                                "--batch-size", "0"])])
def test_a_bad_flag_is_refused_before_torch_loads(module, args):
    # torch takes seconds to import on a busy node; a typo should not wait for it
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", module, *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported and "numba" not in imported, sorted(imported)
    assert proc.stderr.splitlines()[-1].startswith(f"python -m {module}: error: --")


def test_data_and_partition_draw_no_bars_into_a_file(tmp_path):
    # stderr is a pipe here, as in a Slurm log: a bar's redraws would be noise there
    runs = [run_module("fastsample.data", "synth", "--preset", "hetero-tiny", tmp_path / "h"),
            run_module("fastsample.partition", tmp_path / "h", tmp_path / "p2", "--parts", "2")]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "\r" not in proc.stdout + proc.stderr and "it/s" not in proc.stderr, proc.stderr


@pytest.mark.mpi
def test_step_evaluations_stop_at_the_target_and_say_the_time_to_it(p2, tmp_path):
    # MLPerf's recipe: validation every N steps, stop at a target. The evaluations land in
    # their epochs' records, the epochs' traffic stays their steps', the run ends at the first
    # evaluation at or over the target and says how long it took
    common = [*SMALL, "--epochs", "6", "--eval-every", "0"]
    # the plain run and the evaluating one in one launch (helpers.train_many: the command's main() per run)
    runs = train_many(p2, 2, {"plain": (tmp_path / "plain.jsonl", common),
                              "evals": (tmp_path / "evals.jsonl", [*common, "--eval-every-steps", 2])})
    first, records = runs["plain"], runs["evals"]
    steps = first[0]["steps_per_epoch"]
    assert [r["step_losses"] for r in records] == [r["step_losses"] for r in first]  # evaluating changes no step
    assert [r["rounds_per_step"] for r in records] == [r["rounds_per_step"] for r in first]
    evaluated = [(r["epoch"] * steps + e["step"] + 1) for r in records for e in r["step_evals"]]
    assert evaluated == list(range(2, 6 * steps + 1, 2))
    accs = [e["val_acc"] for r in records for e in r["step_evals"]]
    target = sorted(accs)[len(accs) // 2]  # one the run reaches part-way
    reach = next(i for i, a in enumerate(accs) if a >= target)
    proc = train2("--data", p2, *common, "--eval-every-steps", 2, "--target-val-acc", target,
                  "--log-json", tmp_path / "target.jsonl")
    assert proc.returncode == 0, proc.stderr
    records = read_records(tmp_path / "target.jsonl")
    got = [e["val_acc"] for r in records for e in r["step_evals"]]
    assert got == accs[:reach + 1]  # it stopped at the first evaluation reaching the target
    assert records[-1]["time_to_target_s"] > 0 and records[-1]["val_acc"] == accs[reach]
    assert f"time to target (val acc {target}): " in proc.stdout.splitlines()[-1]


@pytest.mark.mpi
@pytest.mark.parametrize("case", range(len(STEP_EVALUATION_ERRORS)),
                         ids=[" ".join(a) for a, _ in STEP_EVALUATION_ERRORS])
def test_step_evaluation_settings_that_cannot_run_are_refused(runs, case):
    proc, message = runs[0]["step evaluation", case], STEP_EVALUATION_ERRORS[case][1]
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("task, seeds", [("node", "nodes"), ("link", "edges"), ("edge-class", "edges"),
                                         ("node-regression", "nodes"), ("edge-regression", "edges")])
def test_every_task_warns_of_single_step_epochs_in_its_seeds(task, seeds):
    # only the node task warned: a link job with a batch over its training edges did one update an epoch silently
    from types import SimpleNamespace

    from fastsample.tasks import task_class

    loader = SimpleNamespace(source=SimpleNamespace(sizes=lambda: [700, 705]))
    trainer = SimpleNamespace(steps_per_epoch=1, loaders={"train": loader})
    config = SimpleNamespace(max_steps=None, batch_size=1000)
    warning = task_class(task)(config).warn_single_step(trainer)
    assert warning.startswith(f"fastsample.train: warning: an epoch is a single step (at most 705 training {seeds} "
                              "per rank, --batch-size 1000)"), warning
    assert task_class(task)(config).warn_single_step(SimpleNamespace(steps_per_epoch=2, loaders={})) is None


MODELS = '''
import os, torch
from fastsample.nn.sage import GraphSAGE

def too_wide(in_dim, num_classes, config):  # cross-entropy takes any width: it trained, exit 0
    return GraphSAGE(in_dim, 16, num_classes + 3, config.layers, aggregation="torch")

def deeper(in_dim, num_classes, config):  # 3 layers on 2 blocks: the hidden rows were taken as logits
    return GraphSAGE(in_dim, 16, num_classes, 3, aggregation="torch")

def seeded_by_rank(in_dim, num_classes, config):  # each rank trained its own replica, silently
    torch.manual_seed(int(os.environ.get("PMI_RANK", "0")))
    return GraphSAGE(in_dim, 16, num_classes, config.layers, aggregation="torch")

def raises(in_dim, num_classes, config):  # was a bare "KeyError: 0", nothing said it came from the factory
    return {}[0]

def uses_sibling(in_dim, num_classes, config):  # a module beside the file: ModuleNotFoundError
    from sibling_layers import make
    return make(in_dim, num_classes, config)
'''


@pytest.mark.mpi
@pytest.mark.parametrize("factory, said, status", [
    ("too_wide", "its output is (40, 7), expected (40, 4): a row per seed", 1),
    ("deeper", "its output is (", 1),
    ("seeded_by_rank", "in start-up checks: the model's initial weights differ between rank 0 and rank 1", 2),
    ("raises", "models.py:raises: the factory raised KeyError: 0 (it was called with in_dim 8 (an int)", 2),
    ("uses_sibling", "", 0)])
def test_a_user_model_of_another_width_depth_or_start_is_refused(p2, tmp_path, factory, said, status):
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "sibling_layers.py").write_text("from fastsample.nn.sage import GraphSAGE\n"
                                                "def make(i, c, config):\n"
                                                "    return GraphSAGE(i, 16, c, config.layers)\n")
    proc = mpiexec(2, "-m", "fastsample.train", "--data", p2, *SMALL, "--epochs", "1", "--quiet", "--model",
                   f"{tmp_path / 'models.py'}:{factory}", timeout=120)
    assert proc.returncode == status and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.mpi
def test_train_sbatch_requeued_before_any_checkpoint_starts_over(p2, tmp_path):
    # a rank killed in the first epoch (RequeueExit=137) left no checkpoint: the requeued run's
    # --resume refused to start ("no checkpoint"), so the requeue only failed again
    from conftest import REPO

    env = {**os.environ, "FASTSAMPLE_LAUNCH": "mpiexec", "SLURM_NTASKS": "2", "SLURM_RESTART_COUNT": "1",
           "FASTSAMPLE_DATA": str(p2), "FASTSAMPLE_PYTHON": sys.executable}
    env.pop("SLURM_JOB_ID", None)
    (tmp_path / "ck").mkdir()
    run = lambda: subprocess.run(["bash", REPO / "jobs" / "train.sbatch", *SMALL, "--epochs", "1", "--quiet",
                                  "--checkpoint-dir", tmp_path / "ck"], capture_output=True, text=True, env=env,
                                 timeout=180, cwd=tmp_path)
    first = run()
    assert first.returncode == 0 and f"no checkpoint in {tmp_path / 'ck'} yet, starting over" in first.stdout, \
        first.stdout + first.stderr
    env["SLURM_RESTART_COUNT"] = "2"  # now there is one: the rerun resumes from it
    again = subprocess.run(["bash", REPO / "jobs" / "train.sbatch", *SMALL, "--epochs", "2", "--quiet",
                            "--checkpoint-dir", tmp_path / "ck"], capture_output=True, text=True, env=env,
                           timeout=180, cwd=tmp_path)
    assert again.returncode == 0 and "resuming (restart 2)" in again.stdout, again.stdout + again.stderr


def test_mlperf_rgat_under_slurm_refuses_a_rank_count_other_than_the_jobs(tmp_path):
    # srun starts SLURM_NTASKS ranks whatever FASTSAMPLE_RANKS says: the job partitioned the
    # graph (hours on IGBH-full) for the wrong count, and only then failed
    from conftest import REPO

    env = {**os.environ, "SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "FASTSAMPLE_RANKS": "3",
           "FASTSAMPLE_WORK": str(tmp_path / "work")}
    proc = subprocess.run(["bash", REPO / "jobs" / "mlperf_rgat.sh"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "FASTSAMPLE_RANKS=3, but this job has SLURM_NTASKS=2 ranks" in proc.stderr, \
        proc.stderr
    assert not (tmp_path / "work").exists()
