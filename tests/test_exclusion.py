"""Excluded edges (link prediction) in the sampling kernels: skipped while picking, the
same MFGs from every kernel, fanouts full where the remaining degree allows, and exactly
the MFGs of the graph with those edges deleted."""

import numpy as np
import pytest

from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.graph import CSCGraph, load_dataset
from fastsample.sampling import edge_positions, sample
from helpers import mfg_equal, native_built

KERNELS = ["numba", "twostep"] + (["native"] if native_built() else [])
FANOUTS = [6, 4, 3]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("excl") / "g"
    write_synthetic(path, SynthConfig(num_nodes=4000, avg_degree=14, num_classes=4, feature_dim=4), progress=False)
    return load_dataset(path).graph


def random_edges(g, n, seed):
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    pick = rng.choice(g.num_edges, n, replace=False)
    return g.indices[pick].astype(np.int64), dst[pick].astype(np.int64)


def remaining_degree(g, kept):
    return np.bincount(np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))[kept], minlength=g.num_nodes)


def seeds_of(g, n, seed):
    return np.sort(np.random.default_rng(seed).choice(g.num_nodes, n, replace=False)).astype(g.indices.dtype)


def test_every_kernel_skips_the_same_edges_and_never_returns_one(graph):
    src, dst = random_edges(graph, 5000, 1)
    pos = edge_positions(graph, src, dst)
    assert len(pos) >= 5000  # every pair is an edge (all copies of a multi-edge count)
    seeds = seeds_of(graph, 300, 2)
    runs = {k: sample(graph, seeds, FANOUTS, seed=4, step=1, kernel=k, exclude=pos) for k in KERNELS}
    for k, mfgs in runs.items():
        assert all(mfg_equal(a, b) for a, b in zip(mfgs, runs["numba"])), k
    banned = set(zip(src.tolist(), dst.tolist()))
    for m in runs["numba"]:
        d = np.repeat(np.arange(m.num_dst), np.diff(m.indptr))
        used = set(zip(m.src_ids[m.indices].tolist(), m.src_ids[d].tolist()))
        assert not used & banned
    plain = sample(graph, seeds, FANOUTS, seed=4, step=1, kernel="numba")
    assert not all(mfg_equal(a, b) for a, b in zip(plain, runs["numba"]))  # the exclusion took effect


def test_fanouts_stay_full_where_the_remaining_degree_allows(graph):
    # exclude most in-edges of a few nodes: each destination still gets min(fanout, what is left)
    src, dst = random_edges(graph, 20000, 3)
    pos = edge_positions(graph, src, dst)
    kept = np.ones(graph.num_edges, bool)
    kept[pos] = False
    left = remaining_degree(graph, kept)
    seeds = seeds_of(graph, 400, 5)
    for k in KERNELS:
        mfgs = sample(graph, seeds, FANOUTS, seed=0, kernel=k, exclude=pos)
        for m, f in zip(mfgs, FANOUTS):
            dst_ids = m.src_ids[:m.num_dst]
            assert np.array_equal(np.diff(m.indptr), np.minimum(left[dst_ids], f)), k


def test_excluding_edges_samples_the_graph_without_them(graph):
    # the rule runs on the remaining in-edges as on a whole list: bitwise the MFGs of the
    # graph with those edges deleted, same keys
    src, dst = random_edges(graph, 8000, 7)
    pos = edge_positions(graph, src, dst)
    kept = np.ones(graph.num_edges, bool)
    kept[pos] = False
    indptr = np.concatenate([[0], np.cumsum(remaining_degree(graph, kept))]).astype(graph.indptr.dtype)
    smaller = CSCGraph(indptr, graph.indices[kept])
    seeds = seeds_of(graph, 500, 9)
    for k in KERNELS:
        got = sample(graph, seeds, FANOUTS, seed=2, epoch=1, kernel=k, exclude=pos)
        want = sample(smaller, seeds, FANOUTS, seed=2, epoch=1, kernel=k)
        assert all(mfg_equal(a, b) for a, b in zip(got, want)), k


def test_bad_exclusions_are_refused(graph):
    seeds = seeds_of(graph, 10, 0)
    for bad, message in ((np.array([5, 3]), "sorted, unique"), (np.array([graph.num_edges]), "sorted, unique"),
                         (np.zeros((2, 2), np.int64), "1-D")):
        with pytest.raises(ValueError, match=message):
            sample(graph, seeds, [3], exclude=bad)
    with pytest.raises(ValueError, match="outside the graph's rows"):
        edge_positions(graph, np.array([0]), np.array([graph.num_nodes]))
