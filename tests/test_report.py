"""Watching and comparing runs: python -m fastsample.report on --log-json files, and
--tensorboard's event files read back with TensorBoard's own reader."""

import pytest

from conftest import run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.partition import partition_dataset
from fastsample.trainer.runlog import read_records, read_runs
from helpers import train_many

SMALL = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--threads", "1", "--quiet"]


@pytest.fixture(scope="module")
def two_logs(tmp_path_factory):
    """Two logs: a.jsonl holds two runs (the second with another lr), b.jsonl one with
    --tensorboard; all in one launch."""
    root = tmp_path_factory.mktemp("report")
    write_synthetic(root / "g", SynthConfig(num_nodes=1500, avg_degree=6, num_classes=4, feature_dim=8,
                                            train_frac=0.1, seed=3), progress=False)
    partition_dataset(root / "g", root / "p2", 2, progress=False)
    a, b = root / "a.jsonl", root / "b.jsonl"
    train_many(root / "p2", 2, {"a1": (a, [*SMALL, "--epochs", "3"]),
                                "a2": (a, [*SMALL, "--epochs", "3", "--lr", "0.03"]),
                                "b": (b, [*SMALL, "--epochs", "2", "--fanouts", "5,5", "--tensorboard", root / "tb"])})
    return root


@pytest.mark.mpi
def test_report_draws_the_runs_and_tabulates_what_differs(two_logs):
    out = two_logs / "rep"
    proc = run_module("fastsample.report", two_logs / "a.jsonl", two_logs / "b.jsonl", "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figure = (out / "curves.png").read_bytes()
    assert figure.startswith(b"\x89PNG\r\n\x1a\n") and len(figure) > 10_000
    table = (out / "runs.md").read_text()
    assert table in proc.stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table.splitlines()[2:]}
    runs = [r for log in ("a.jsonl", "b.jsonl") for r in read_runs(two_logs / log)]
    assert rows["run id"] == [r.run_id for r in runs]
    assert rows["lr"][1] == "0.03" and rows["lr"][0] == rows["lr"][2] != "0.03"  # what differs, each run's value
    assert rows["fanouts"] == ["4,3", "4,3", "5,5"] and rows["epochs run"] == ["0..2", "0..2", "0..1"]
    assert "seed" not in rows and "log_json" not in rows and "tensorboard" not in rows  # alike, or where output went
    best = max(runs[1].records, key=lambda r: r.score)
    assert rows["best val_acc"][1] == f"{best.score:.4f} (epoch {best.epoch})"
    assert rows["test_acc there"][1] == f"{best.metrics['test_acc']:.4f}"
    # one run chosen by the end of its id; svg on request
    proc = run_module("fastsample.report", two_logs / "a.jsonl", "--out", out / "one", "--run", runs[1].run_id[-6:],
                      "--format", "svg")
    assert proc.returncode == 0, proc.stderr
    assert (out / "one" / "curves.svg").read_text().lstrip().startswith("<?xml")
    assert (out / "one" / "runs.md").read_text().splitlines()[0].count("|") == 3  # one run's column


def test_report_on_a_file_that_is_not_a_log_is_one_line(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("epoch 1 went well\n")
    proc = run_module("fastsample.report", bad, "--out", tmp_path / "rep")
    assert proc.returncode == 2 and proc.stderr == \
        f"python -m fastsample.report: error: {bad}, line 1: not a JSON record (Expecting value)\n", proc.stderr
    assert not (tmp_path / "rep").exists()


@pytest.mark.mpi
def test_tensorboard_events_hold_the_logs_step_losses(two_logs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    (run,) = read_runs(two_logs / "b.jsonl")
    events = EventAccumulator(str(two_logs / "tb" / run.run_id), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    steps = events.Tensors("train/loss_step")
    logged = [x for r in read_records(two_logs / "b.jsonl") for x in r["step_losses"]]
    assert [tensor_util.make_ndarray(e.tensor_proto).item() for e in steps] == logged  # bitwise: doubles
    assert [e.step for e in steps] == list(range(len(logged)))
    per_epoch = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert [s for s, _ in per_epoch["val/acc"]] == [0, 1]
    assert [v for _, v in per_epoch["val/acc"]] == pytest.approx([r.metrics["val_acc"] for r in run.records])
    assert {"train/loss", "train/acc", "test/acc", "time/epoch", "time/gather", "comm/sent_MiB"} <= set(per_epoch)


def test_tensorboard_drops_what_a_stopped_run_logged_past_the_resume_point(tmp_path):
    # the first run wrote no session start, so TensorBoard kept both curves over steps 5..9
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator  # the UI's reader
    from tensorboard.util import tensor_util

    from fastsample.trainer.report import TensorBoardReporter

    first = TensorBoardReporter(str(tmp_path), "run")
    for s in range(10):
        first.step(0, s, 10, 1.0 + s)
    first.writer.close()
    resumed = TensorBoardReporter(str(tmp_path), "run", first_step=5)  # its checkpoint: step 5
    for s in range(5, 10):
        resumed.step(0, s, 10, 100.0 + s)
    resumed.writer.close()
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"tensors": 0})
    events.Reload()
    got = [(e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in events.Tensors("train/loss_step")]
    assert got == [(s, 1.0 + s) for s in range(5)] + [(s, 100.0 + s) for s in range(5, 10)]


def test_a_setting_a_resume_changed_shows_each_value_not_the_first_alone():
    # the report took the first header's config: a run resumed at another rate read as "alike"
    from fastsample.report import settings
    from fastsample.trainer.runlog import Run

    run = Run("r", headers=[{"config": {"lr": 0.01, "epochs": 4, "resume": False}},
                            {"config": {"lr": 0.05, "epochs": 4, "resume": True}},
                            {"config": {"lr": 0.05, "epochs": 6, "resume": True}}])
    got = settings(run)
    assert (got["lr"], got["epochs"]) == ("0.01 -> 0.05", "4 -> 6") and "resume" not in got


def test_a_log_that_stops_short_of_its_epochs_is_not_said_to_have_run_them():
    # a run stopped by a NaN loss (--on-nan stop) or killed leaves complete records up to
    # where it stopped: the report said "ran its epochs"
    from fastsample.report import finals
    from fastsample.trainer.metrics import EpochRecord
    from fastsample.trainer.runlog import Run

    def record(epoch):
        return EpochRecord(epoch=epoch, loss=0.5, train_acc=0.5, task="node", epoch_s=1.0)
    header = {"config": {"epochs": 5}}
    assert finals(Run("r", [header], [record(0), record(1)]))["ended"] == \
        "log ends at epoch 1 of 0..4 (failed or killed there)"
    assert finals(Run("r", [header], [record(e) for e in range(5)]))["ended"] == "ran its epochs"
    resumed = [header, {"config": {"epochs": 7}}]  # a resume that asked for more
    assert finals(Run("r", resumed, [record(e) for e in range(5)]))["ended"].startswith("log ends at epoch 4 of 0..6")


def test_a_non_finite_loss_is_written_null_and_read_back_as_nan(tmp_path):
    # JSON has no NaN: written bare, jq (and any strict reader) refused the whole log
    import json
    import math

    from fastsample.trainer.metrics import EpochRecord
    from fastsample.trainer.runlog import append_log, read_log

    path = tmp_path / "log.jsonl"
    append_log(path, EpochRecord(epoch=0, loss=float("nan"), train_acc=0.5, task="node", epoch_s=1.0,
                                 step_losses=[0.7, float("inf"), float("nan")]))
    line = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in the log"))
    assert line["record"] == "epoch" and line["loss"] is None and line["step_losses"] == [0.7, None, None]
    back, = read_log(path)
    assert math.isnan(back.loss) and back.step_losses[0] == 0.7 and all(map(math.isnan, back.step_losses[1:]))


def test_a_cut_epochs_parts_write_no_per_epoch_train_means_or_times(tmp_path):
    # a SIGTERM mid-epoch left two records of the epoch, each a mean over part of its steps:
    # TensorBoard drew them as the epoch's loss and time
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    from fastsample.trainer.metrics import EpochRecord
    from fastsample.trainer.report import TensorBoardReporter

    tb = TensorBoardReporter(str(tmp_path), "run")
    tb.epoch(EpochRecord(epoch=0, loss=0.9, train_acc=0.5, task="node", epoch_s=2.0))
    tb.epoch(EpochRecord(epoch=1, loss=0.7, train_acc=0.6, task="node", epoch_s=1.0, complete=False))  # stopped
    tb.epoch(EpochRecord(epoch=1, loss=0.5, train_acc=0.7, task="node", epoch_s=1.1, first_step=5,
                         metrics={"val_acc": 0.8}))  # its resumed part, evaluated at the epoch's end
    tb.writer.close()
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"tensors": 0})
    events.Reload()
    assert [e.step for e in events.Tensors("train/loss")] == [0]
    assert [e.step for e in events.Tensors("time/epoch")] == [0]
    assert [e.step for e in events.Tensors("val/acc")] == [1]


def test_a_resumed_runs_closing_line_weighs_the_epochs_before_its_resume():
    # the closing line saw only the resumed process's epochs: "best val 0.55 at epoch 5" after
    # epochs 3-4 had reached 0.725, and beside an early stop naming epoch 2's 0.70
    from fastsample.trainer.metrics import EpochRecord, summary

    before = {"epoch": 2, "score": 0.7, "metrics": {"val_acc": 0.7, "test_acc": 0.6}}
    after = [EpochRecord(epoch=e, loss=0.5, train_acc=0.5, task="node", epoch_s=1.0, best_before=before,
                         metrics={"val_acc": v, "test_acc": 0.5}) for e, v in ((3, 0.55), (4, 0.6))]
    assert summary(after).startswith("done: epochs 3..4, best val 0.7000 at epoch 2 (test there 0.6000), before the "
                                     "resume, mean epoch")
    after[1].metrics["val_acc"] = 0.75
    assert summary(after).startswith("done: epochs 3..4, best val 0.7500 at epoch 4 (test there 0.5000), mean epoch")


def test_report_on_a_directory_says_so(tmp_path):
    proc = run_module("fastsample.report", tmp_path, "--out", tmp_path / "rep")
    assert proc.returncode == 2 and proc.stderr == \
        f"python -m fastsample.report: error: {tmp_path}: a directory, not a --log-json file\n", proc.stderr


def test_a_run_evaluated_on_empty_splits_is_not_said_to_have_turned_evaluation_off():
    # every labelled row in train: the closing line said "no evaluation (--eval-every 0)",
    # a flag the user never gave
    from fastsample.trainer.metrics import EpochRecord, summary

    ran = EpochRecord(epoch=0, loss=0.5, train_acc=0.5, task="node", epoch_s=1.0, eval="sampled",
                      metrics={"val_acc": None, "test_acc": None})
    assert "no evaluation (no validation rows to score)" in summary([ran])
    off = EpochRecord(epoch=0, loss=0.5, train_acc=0.5, task="node", epoch_s=1.0)
    assert "no evaluation (--eval-every 0)" in summary([off])
