"""Link prediction's data path: edge splits (python -m fastsample.data link-split), their
partitioning, and EdgeLoader batches (negatives, target edges excluded while picking, the
same batches in every kernel and mode)."""

import json

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.loading import EdgeLoader
from fastsample.data.edge_splits import edge_keys, load_edge_split
from fastsample.data.graph import DatasetError, load_dataset
from helpers import REPO, assert_checks, mpiexec


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    root = tmp_path_factory.mktemp("link")
    write_synthetic(root / "g", SynthConfig(num_nodes=1500, avg_degree=8, num_classes=4, feature_dim=8),
                    progress=False)
    proc = run_module("fastsample.data", "link-split", root / "g", root / "l", "--val-fraction", "0.05",
                      "--test-fraction", "0.1", "--negatives", "20", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    proc = run_module("fastsample.partition", root / "l", root / "l2", "--parts", "2")
    assert proc.returncode == 0, proc.stderr
    return root


def test_link_split_holds_out_edges_and_their_reverses(linked):
    whole, ds = load_dataset(linked / "g"), load_dataset(linked / "l")
    split = load_edge_split(linked / "l", ds.num_nodes, ds.meta["link"], graph=ds.graph)
    assert split.undirected and split.val_neg.shape == (len(split.val), 20)
    n = ds.num_nodes
    pairs = {s: set(edge_keys(e[:, 0], e[:, 1], n, True).tolist()) for s, e in
             (("train", split.train), ("val", split.val), ("test", split.test))}
    assert not (pairs["train"] & pairs["val"]) and not (pairs["train"] & pairs["test"])
    total = len(pairs["train"]) + len(pairs["val"]) + len(pairs["test"])
    assert abs(len(pairs["test"]) / total - 0.1) < 0.01 and abs(len(pairs["val"]) / total - 0.05) < 0.01
    # held-out edges left the topology in both directions; the others are all still there
    dst = np.repeat(np.arange(n), np.diff(ds.graph.indptr))
    kept = set(edge_keys(ds.graph.indices, dst, n, True).tolist())
    assert not kept & (pairs["val"] | pairs["test"]) and pairs["train"] <= kept
    wdst = np.repeat(np.arange(n), np.diff(whole.graph.indptr))
    assert whole.graph.num_edges - ds.graph.num_edges == 2 * (len(pairs["val"]) + len(pairs["test"]))
    # negatives are no edges of their source in the whole graph
    edges = set(edge_keys(whole.graph.indices, wdst, n).tolist())
    neg = edge_keys(np.repeat(split.test[:, 0], 20), split.test_neg.ravel(), n)
    assert not edges & set(neg.tolist())
    # each positive's 20 negatives are 20 nodes: drawn with replacement, ~1 row in 25 repeated
    # one, which then counted twice in the rank (MRR and Hits@K over fewer than 20)
    for negatives in (split.val_neg, split.test_neg):
        assert (np.diff(np.sort(negatives, axis=1), axis=1) > 0).all()


def test_bad_edge_splits_are_one_clear_error(linked, tmp_path):
    import shutil

    for case, (name, arr, message) in enumerate((
            ("test.npy", lambda s: np.concatenate([[[0, 10**6]], s.test[1:]]), "outside 0..1499"),
            ("test.npy", lambda s: np.concatenate([s.train[:1], s.test[1:]]), "held-out edges are also in train.npy"),
            ("val_neg.npy", lambda s: s.val_neg[:-1], "expected ("),
            # another K than meta.json's: the MRR would be over other candidates, silently
            ("test_neg.npy", lambda s: s.test_neg[:, :10], "10), expected (524, 20): 20 negatives for each of "
                                                           "test.npy's 524 edges (meta.json's negatives: 20)"),
            ("train.npy", lambda s: s.train[:, :1], "expected (edges, 2)"))):
        bad = tmp_path / f"bad{case}"
        shutil.copytree(linked / "l", bad)
        ds = load_dataset(bad)
        split = load_edge_split(bad, ds.num_nodes, ds.meta["link"], mmap=False)
        np.save(bad / "link" / name, arr(split))
        proc = run_module("fastsample.partition", bad, tmp_path / f"p{case}", "--parts", "2")
        assert proc.returncode != 0 and message in proc.stderr and f"link/{name}" in proc.stderr, proc.stderr
        assert not (tmp_path / f"p{case}").exists()
    for flags, message in ((["--val-fraction", "0.6", "--test-fraction", "0.5"], "nothing left to train on"),
                           (["--negatives", "0"], "--negatives: 0")):
        proc = run_module("fastsample.data", "link-split", linked / "g", tmp_path / "x", *flags)
        assert proc.returncode != 0 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    # a split of a split held its edges out of what was left, silently (4,488 -> 3,816 training edges on Cora)
    proc = run_module("fastsample.data", "link-split", linked / "l", tmp_path / "x")
    assert proc.returncode == 2 and f"{linked / 'l'}: already a link-split dataset" in proc.stderr, proc.stderr


def test_one_process_batches(linked):
    loader = EdgeLoader(linked / "l", [4, 3], 100, negatives=3, seed=2)
    ds = load_dataset(linked / "l")
    for batch in loader:
        assert np.array_equal(batch.seeds[batch.src.numpy()], batch.edges[:, 0])
        assert np.array_equal(batch.seeds[batch.dst.numpy()], batch.edges[:, 1])
        assert batch.negatives.shape == (len(batch), 3)
        assert np.array_equal(batch.mfgs[-1].src_ids[:batch.mfgs[-1].num_dst], batch.seeds)
        assert np.array_equal(batch.x.numpy(), ds.features[batch.mfgs[0].src_ids])
    strict = EdgeLoader(linked / "l", [4, 3], 100, negatives=5, seed=2, strict=True)
    g = ds.graph
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(g.indptr))
    edges = set(edge_keys(g.indices, dst, ds.num_nodes).tolist())
    for batch in strict:
        keys = edge_keys(np.repeat(batch.edges[:, 0], 5), batch.negatives.ravel(), ds.num_nodes)
        assert not edges & set(keys.tolist())


@pytest.mark.mpi
def test_kernels_and_modes_give_the_same_batches_without_their_own_edges(linked):
    meta = json.loads((linked / "l2" / "partition.json").read_text())
    assert sum(p["link_train"] for p in meta["parts"]) == meta["dataset"]["link"]["edges"]["train"]
    proc = mpiexec(2, REPO / "tests" / "edge_loader_worker.py", linked / "l2")
    assert_checks(proc, 2, [f"step{s}" for s in range(3)])
