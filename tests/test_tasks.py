"""The tasks beyond node classification and link prediction: their labels in the dataset
format (float node targets), the data they are derived on (python -m fastsample.data
targets), and that each learns what its generator hides from a feature-only MLP."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import run_module
from fastsample.comm.local import LocalCommunicator
from fastsample.data.graph import CSCGraph, DatasetError, load_dataset, write_dataset
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from fastsample.trainer import TrainConfig, Trainer
from fastsample.trainer.report import Reporter
from helpers import REPO

MLP = f"{REPO / 'bench' / 'mlp_encoder.py'}:build"


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    write_synthetic(root / "untyped", SynthConfig(num_nodes=2000, avg_degree=10, num_classes=4, feature_dim=16),
                    progress=False)
    write_typed_synthetic(root / "typed", TYPED_PRESETS["hetero-tiny"], progress=False)
    return root


def _graph():
    indptr = np.array([0, 1, 2, 3])
    return CSCGraph(indptr, np.array([1, 2, 0]))


def test_float_labels_are_regression_targets_checked_like_classes(tmp_path):
    y = np.array([0.5, np.nan, -1.25], dtype=np.float32)
    write_dataset(tmp_path / "ok", _graph(), np.zeros((3, 2), np.float32), y, [0], [2], [], name="r",
                  num_classes=0)
    ds = load_dataset(tmp_path / "ok")
    assert ds.labels.dtype == np.float32 and ds.num_classes == 0 and np.isnan(ds.labels[1])
    assert json.loads((tmp_path / "ok" / "meta.json").read_text())["dtypes"]["labels"] == "float32"
    bad = [((y, [1], [], 0), "train.*unlabelled nodes \\(label NaN\\)"),  # a split needs its targets
           ((y, [0], [], 3), "num_classes.*0 for float targets"),
           ((np.array([0, 1, 2]), [0], [], 0), "num_classes.*positive integer for class labels"),
           ((np.array([0.0, np.inf, 1], np.float32), [0], [], 0), "labels.*1 targets are infinite")]
    for (labels, train, val, classes), message in bad:
        with pytest.raises(DatasetError, match=message):
            write_dataset(tmp_path / "bad", _graph(), np.zeros((3, 2), np.float32), labels, train, val, [],
                          name="r", num_classes=classes)
        assert not (tmp_path / "bad").exists()


def test_targets_refuses_what_it_cannot_derive_in_one_line(graphs, tmp_path):
    cases = [(["--task", "edge-class"], graphs / "typed", "--relation: required where the graph has several"),
             (["--task", "edge-class", "--relation", "author:rev_written_by:paper"], graphs / "typed",
              "both must be of the labelled type paper"),
             (["--task", "edge-class", "--relation", "paper:nope:paper"], graphs / "typed", "is not an edge type"),
             (["--task", "edge-class", "--fractions", "0.5,0.5"], graphs / "untyped", "--fractions: [0.5, 0.5]"),
             (["--task", "edge-class", "--classes", "1"], graphs / "untyped", "--classes: 1, expected 2..256")]
    for flags, data, message in cases:
        proc = run_module("fastsample.data", "targets", data, tmp_path / "out", *flags)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (flags, proc.stderr)
        assert not (tmp_path / "out").exists()
    regression = tmp_path / "regression"
    assert run_module("fastsample.data", "targets", graphs / "untyped", regression, "--task",
                      "node-regression").returncode == 0
    proc = run_module("fastsample.data", "targets", regression, tmp_path / "again", "--task", "node-regression")
    assert proc.returncode == 2 and "derived targets start from class labels" in proc.stderr


def _run(data, **settings) -> list:
    config = TrainConfig(data=str(data), **{**dict(fanouts=(10, 10), batch_size=64, hidden=32, threads=1, quiet=True,
                                                   matmul="blas"), **settings})
    return Trainer(config, LocalCommunicator(), reporter=Reporter()).run()


@pytest.mark.slow
@pytest.mark.parametrize("data", ["untyped", "typed"])
def test_node_regression_learns_the_neighbourhood_an_mlp_cannot_see(graphs, tmp_path, data):
    out = tmp_path / "targets"
    assert run_module("fastsample.data", "targets", graphs / data, out, "--task", "node-regression").returncode == 0
    best = {}
    for name, model in (("gnn", "sage"), ("mlp", MLP)):
        history = _run(out, task="node-regression", epochs=12, model=model, eval="full", eval_every_steps=5)
        best[name] = max(r.score for r in history)
        assert history[-1].task == "node-regression" and set(history[-1].metrics) >= {"val_r2", "test_mae"}
        # within epochs too (--eval-every-steps): the validation R2
        evals = [e for r in history for e in r.step_evals]
        assert evals and all(math.isfinite(e["val_r2"]) for e in evals), evals
    assert best["gnn"] > 0.5 and best["gnn"] > best["mlp"] + 0.3, best


def test_an_empty_train_split_is_refused_not_trained_for_no_steps(graphs, tmp_path):
    ds = load_dataset(graphs / "untyped")
    write_dataset(tmp_path / "none", ds.graph, ds.features, ds.labels, [], ds.val, ds.test, name="none",
                  num_classes=ds.num_classes)
    with pytest.raises(ValueError, match="the train split is empty \\(node\\): nothing to train on"):
        _run(tmp_path / "none", epochs=1)


def test_a_task_refuses_labels_of_the_other_kind(graphs, tmp_path):
    out = tmp_path / "targets"
    assert run_module("fastsample.data", "targets", graphs / "untyped", out, "--task", "node-regression").returncode == 0
    with pytest.raises(ValueError, match="its labels are values \\(float32\\); --task node trains on classes"):
        _run(out, task="node", epochs=1)
    with pytest.raises(ValueError, match="its labels are classes \\(int64\\); --task node-regression trains on values"):
        _run(graphs / "untyped", task="node-regression", epochs=1)


@pytest.mark.slow
@pytest.mark.parametrize("data", ["untyped", "typed"])
def test_edge_tasks_learn_what_both_endpoints_decide_and_an_mlp_cannot(graphs, tmp_path, data):
    relation = ["--relation", "paper:cites:paper"] if data == "typed" else []
    for task, floor in (("edge-class", 0.85), ("edge-regression", 0.5)):
        out = tmp_path / task
        assert run_module("fastsample.data", "targets", graphs / data, out, "--task", task, *relation).returncode == 0
        best = {}
        for name, model in (("gnn", "sage"), ("mlp", MLP)):
            history = _run(out, task=task, epochs=6, model=model, batch_size=256)
            best[name] = max(r.score for r in history)
            assert history[-1].eval == "exact"
        assert best["gnn"] > floor and best["gnn"] > best["mlp"] + 0.15, (task, best)


def test_labelled_edges_are_checked_and_partitioned_with_their_destinations(graphs, tmp_path):
    from fastsample.data.edge_labels import load_edge_labels

    out = tmp_path / "labelled"
    assert run_module("fastsample.data", "targets", graphs / "untyped", out, "--task", "edge-class").returncode == 0
    meta = json.loads((out / "meta.json").read_text())["edge_labels"]
    ds = load_dataset(out)
    labelled = load_edge_labels(out, ds.num_nodes, meta, graph=ds.graph)
    assert labelled.labels["train"].dtype == np.int64 and labelled.labels["train"].max() < meta["num_classes"]
    parts = tmp_path / "parts"
    assert run_module("fastsample.partition", out, parts, "--parts", "2").returncode == 0
    layout = json.loads((parts / "partition.json").read_text())
    assert layout["dataset"]["edge_labels"] == meta
    assert sum(p["edge_labels_train"] for p in layout["parts"]) == meta["edges"]["train"]
    # the same edges and labels, in new ids, each with its destination's owner
    orig = np.load(parts / "orig_ids.npy").astype(np.int64)
    got = {}
    for r in range(2):
        part = load_edge_labels(parts / f"part-{r}", ds.num_nodes, meta)
        lo, hi = layout["offsets"][r], layout["offsets"][r + 1]
        assert ((part.edges["val"][:, 1] >= lo) & (part.edges["val"][:, 1] < hi)).all()
        got.update(zip(map(tuple, orig[part.edges["val"]].tolist()), part.labels["val"].tolist()))
    assert got == dict(zip(map(tuple, labelled.edges["val"].tolist()), labelled.labels["val"].tolist()))
    # a bad file: one line naming it
    y = np.load(out / "edge_labels" / "test_labels.npy")
    for bad, message in ((y.astype(np.float32), "test_labels.npy: float32"),
                         (np.full_like(y, meta["num_classes"]), "test_labels.npy: labels span"),
                         (y[:-1], "test_labels.npy: int64")):
        np.save(out / "edge_labels" / "test_labels.npy", bad)
        with pytest.raises(DatasetError, match=message):
            load_edge_labels(out, ds.num_nodes, meta, graph=ds.graph)
    np.save(out / "edge_labels" / "test_labels.npy", y)
    e = np.load(out / "edge_labels" / "val.npy")
    np.save(out / "edge_labels" / "val.npy", np.stack([e[:, 0], (e[:, 1] + 1) % ds.num_nodes], axis=1))
    with pytest.raises(DatasetError, match="val.npy: .* edges are not edges of relation"):
        load_edge_labels(out, ds.num_nodes, meta, graph=ds.graph)
