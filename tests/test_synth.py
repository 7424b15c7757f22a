"""The synthetic generator: reproducible, heavy-tailed, and learnable by a GNN more than an MLP."""

import json
import sys

import numpy as np
import pytest

from conftest import REPO, run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.graph import load_dataset

CFG = SynthConfig(num_nodes=20_000, avg_degree=16, num_classes=8, feature_dim=16, seed=3)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "g"
    write_synthetic(path, CFG, progress=False)
    return path


def test_same_seed_same_graph_other_seed_other_graph(synth, tmp_path):
    write_synthetic(tmp_path / "again", CFG, progress=False)
    write_synthetic(tmp_path / "other", SynthConfig(**{**CFG.__dict__, "seed": 4}), progress=False)
    a, b, c = (load_dataset(p) for p in (synth, tmp_path / "again", tmp_path / "other"))
    for name in ("indptr", "indices"):
        assert np.array_equal(getattr(a.graph, name), getattr(b.graph, name))
    assert np.array_equal(a.features, b.features) and np.array_equal(a.train, b.train)
    assert not np.array_equal(a.graph.indptr, c.graph.indptr)


def test_degrees_are_heavy_tailed_and_graph_undirected(synth):
    g = load_dataset(synth).graph
    deg = g.in_degrees()
    assert deg.max() >= 50 * deg.mean(), (deg.max(), deg.mean())
    assert 0.7 * CFG.avg_degree <= deg.mean() <= CFG.avg_degree
    src = g.indices
    dst = np.repeat(np.arange(g.num_nodes), deg).astype(np.int64)
    fwd = np.sort(src.astype(np.int64) * g.num_nodes + dst)
    bwd = np.sort(dst * g.num_nodes + src)
    assert np.array_equal(fwd, bwd), "both directions must be stored"


def test_labels_are_homophilous(synth):
    ds = load_dataset(synth)
    dst = np.repeat(np.arange(ds.graph.num_nodes), ds.graph.in_degrees())
    same = (ds.labels[ds.graph.indices] == ds.labels[dst]).mean()
    assert same > 0.6, f"only {same:.2f} of edges join nodes of the same class"


def test_a_gnn_beats_an_mlp(synth, tmp_path):
    out = tmp_path / "q.json"
    import subprocess

    proc = subprocess.run([sys.executable, str(REPO / "bench" / "synth_quality.py"), synth,
                           "--epochs", "100", "--json", out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert r["gnn_test_acc"] > r["mlp_test_acc"] + 0.15, r


def test_cli_rejects_bad_parameters_by_name(tmp_path):
    proc = run_module("fastsample.data", "synth", tmp_path / "x", "--exponent", "1.5")
    assert proc.returncode == 2 and "--exponent must be > 2" in proc.stderr, proc.stderr
    proc = run_module("fastsample.data", "synth", tmp_path / "x", "--nodes", "1")
    assert proc.returncode == 2 and "--nodes must be >= 2 (got 1)" in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists()
