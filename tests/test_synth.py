"""The synthetic generator: reproducible, heavy-tailed, and learnable by a GNN more than an MLP."""

import json
import sys

import numpy as np
import pytest

from conftest import REPO, run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.graph import load_dataset

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


def sequential_edges(cfg):
    """The generator as it was before it went parallel: one stream, chunk after chunk,
    np.searchsorted for every endpoint. Its (src, dst) in generation ids."""
    from fastsample.data import synth

    rng = np.random.default_rng(cfg.seed)
    comm, starts = synth._communities(cfg, rng)
    cw = np.cumsum(synth._weights(cfg, rng))
    total, last = cw[-1], cfg.num_nodes - 1
    lo, hi = np.concatenate([[0.0], cw])[starts[:-1]], cw[starts[1:] - 1]
    num_pairs = int(round(cfg.num_nodes * cfg.avg_degree / 2))
    src, dst = [], []
    for begin in range(0, num_pairs, synth.CHUNK):
        k = min(synth.CHUNK, num_pairs - begin)
        u = np.minimum(np.searchsorted(cw, rng.random(k) * total, side="right"), last)
        inside, r = rng.random(k) < cfg.intra, rng.random(k)
        c = comm[u]
        v = np.minimum(np.searchsorted(cw, np.where(inside, lo[c] + r * (hi[c] - lo[c]), r * total), side="right"),
                       last)
        src.append(u)
        dst.append(v)
    return np.concatenate(src), np.concatenate(dst), rng


def test_chunked_parallel_generator_equals_the_sequential_one(monkeypatch, tmp_path):
    # chunk c jumps the stream to its own start and looks endpoints up through a bucket
    # table: the edges must be exactly the sequential generator's, chunk boundaries and
    # thread counts notwithstanding, and what follows the edges (the permutation, the
    # features) must continue the stream where the sequential one left it
    from fastsample.data import synth

    monkeypatch.setattr(synth, "CHUNK", 1000)  # many chunks, one partial
    cfg = SynthConfig(num_nodes=3001, avg_degree=9.5, num_classes=5, feature_dim=4, seed=11)
    src, dst, rng = sequential_edges(cfg)
    stream = synth.EdgeStream(cfg)
    assert len(stream) == 15
    got = [stream.chunk(c) for c in range(len(stream))]
    perm = rng.permutation(cfg.num_nodes)
    np.testing.assert_array_equal(np.concatenate([u for u, _ in got]), perm[src])
    np.testing.assert_array_equal(np.concatenate([v for _, v in got]), perm[dst])
    assert stream.after.bit_generator.state == rng.bit_generator.state
    for threads in (1, 2):
        write_synthetic(tmp_path / f"t{threads}", cfg, progress=False, threads=threads)
    for name in ("indptr", "indices", "features", "labels", "train"):
        assert (tmp_path / "t1" / f"{name}.npy").read_bytes() == (tmp_path / "t2" / f"{name}.npy").read_bytes(), name


def test_float16_features(tmp_path):
    cfg = SynthConfig(num_nodes=500, avg_degree=6, num_classes=3, feature_dim=8, feature_dtype="float16")
    write_synthetic(tmp_path / "h", cfg, progress=False)
    write_synthetic(tmp_path / "f", SynthConfig(**{**cfg.__dict__, "feature_dtype": "float32"}), progress=False)
    h, f = load_dataset(tmp_path / "h"), load_dataset(tmp_path / "f")
    assert h.features.dtype == np.float16 and h.meta["dtypes"]["features"] == "float16"
    np.testing.assert_array_equal(h.features, f.features.astype(np.float16))
    proc = run_module("fastsample.data", "synth", tmp_path / "x", "--feature-dtype", "float64")
    assert proc.returncode == 2 and "--feature-dtype must be one of float32, float16 (got 'float64')" in proc.stderr, \
        proc.stderr
