"""Excluded edges (link prediction) in the sampling kernels: skipped while picking, the
same MFGs from every kernel, fanouts full where the remaining degree allows, and exactly
the MFGs of the graph with those edges deleted."""

import numpy as np
import pytest

from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.graph import CSCGraph, load_dataset
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


# --- typed graphs: the same rule per (node, edge type) segment -----------------------------

TYPED_FANOUTS = [{"cites": 4, "rev_cites": 2, "*": 3}, {"written_by": 1, "rev_topic": -1, "*": 2}, 5]


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

    path = tmp_path_factory.mktemp("excl-typed") / "h"
    write_typed_synthetic(path, TYPED_PRESETS["hetero-tiny"], progress=False)
    return load_dataset(path).graph


def random_typed_edges(g, n, seed):
    """(src, dst, etype) of n random edges of g."""
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    pick = rng.choice(g.num_edges, n, replace=False)
    return g.indices[pick].astype(np.int64), dst[pick].astype(np.int64), g.type_per_edge[pick].astype(np.int64)


def without(g, kept):
    """g with only the edges ``kept`` (a mask over its positions): the same types and ids."""
    counts = np.bincount(np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))[kept], minlength=g.num_nodes)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(g.indptr.dtype)
    return CSCGraph(indptr, g.indices[kept], g.type_per_edge[kept], g.node_type_offset, g.node_types, g.edge_types)


def typed_equal(a, b):
    return mfg_equal(a, b) and np.array_equal(a.edge_types, b.edge_types)


def test_typed_positions_take_only_the_copies_of_the_given_type(typed):
    src, dst, etype = random_typed_edges(typed, 3000, 11)
    pos = edge_positions(typed, src, dst, etype)
    every = edge_positions(typed, src, dst)
    want = {(s, d, t) for s, d, t in zip(src.tolist(), dst.tolist(), etype.tolist())}
    gdst = np.repeat(np.arange(typed.num_nodes), np.diff(typed.indptr))
    got = set(zip(typed.indices[pos].tolist(), gdst[pos].tolist(), typed.type_per_edge[pos].tolist()))
    assert got == want and len(pos) >= len(want)
    assert set(pos.tolist()) < set(every.tolist())  # some pairs are edges of two types: those copies stay
    with pytest.raises(ValueError, match="outside the graph's 0..7"):
        edge_positions(typed, src[:1], dst[:1], [8])
    with pytest.raises(ValueError, match="one per pair"):
        edge_positions(typed, src[:2], dst[:2], [0])


def test_typed_kernels_skip_the_same_typed_edges_as_if_deleted(typed):
    # every kernel, the same typed MFGs; no excluded (src, dst, type) in any layer; each
    # destination's picks of type r = min(fanout, what is left of its type-r segment); and
    # bitwise the MFGs of the graph with those edges deleted (same keys)
    from fastsample.sampling import fanout_matrix

    src, dst, etype = random_typed_edges(typed, 6000, 12)
    pos = edge_positions(typed, src, dst, etype)
    kept = np.ones(typed.num_edges, bool)
    kept[pos] = False
    smaller = without(typed, kept)
    seeds = seeds_of(typed, 400, 13)
    runs = {k: sample(typed, seeds, TYPED_FANOUTS, seed=6, step=2, kernel=k, exclude=pos) for k in KERNELS}
    for k, mfgs in runs.items():
        assert all(typed_equal(a, b) for a, b in zip(mfgs, runs["numba"])), k
        want = sample(smaller, seeds, TYPED_FANOUTS, seed=6, step=2, kernel=k)
        assert all(typed_equal(a, b) for a, b in zip(mfgs, want)), k
    banned = set(zip(src.tolist(), dst.tolist(), etype.tolist()))
    F = fanout_matrix(typed, TYPED_FANOUTS)
    gdst = np.repeat(np.arange(typed.num_nodes), np.diff(typed.indptr))
    left = np.zeros((typed.num_nodes, typed.num_edge_types), np.int64)  # remaining degree per (node, type)
    np.add.at(left, (gdst[kept], typed.type_per_edge[kept].astype(np.int64)), 1)
    for layer, m in enumerate(runs["numba"]):
        d = np.repeat(np.arange(m.num_dst), np.diff(m.indptr))
        used = set(zip(m.src_ids[m.indices].tolist(), m.src_ids[d].tolist(), m.edge_types.tolist()))
        assert not used & banned, f"layer {layer} uses an excluded edge"
        per_type = np.zeros((m.num_dst, typed.num_edge_types), np.int64)
        np.add.at(per_type, (d, m.edge_types.astype(np.int64)), 1)
        f = F[layer]
        rem = left[m.dst_ids]
        assert np.array_equal(per_type, np.where(f < 0, rem, np.minimum(rem, f))), f"layer {layer}"
    plain = sample(typed, seeds, TYPED_FANOUTS, seed=6, step=2, kernel="numba")
    assert not all(typed_equal(a, b) for a, b in zip(plain, runs["numba"]))  # the exclusion took effect


def test_typed_owner_side_picks_skip_excluded_edges_alike(typed):
    # sample_neighbors (vanilla's owner side), native and numba: the same picks and types,
    # those of the graph without the excluded edges
    from fastsample.native import lib
    from fastsample.sampling import fanout_matrix, sample_neighbors
    from fastsample.sampling.rng import type_keys

    src, dst, etype = random_typed_edges(typed, 4000, 14)
    pos = edge_positions(typed, src, dst, etype)
    nodes = seeds_of(typed, 700, 15)
    fanout = fanout_matrix(typed, [{"cites": 3, "*": 1}])[0]
    key = type_keys([987654321], typed.num_edge_types)[0]
    kept = np.ones(typed.num_edges, bool)
    kept[pos] = False
    for k in ["numba"] + (["native"] if lib is not None else []):
        got = sample_neighbors(typed, nodes, fanout, key, kernel=k, exclude=pos)
        want = sample_neighbors(without(typed, kept), nodes, fanout, key, kernel=k)
        assert all(np.array_equal(x, y) for x, y in zip(got, want)), k
        assert len(got[2]) == len(got[1]) > 0  # each pick with its edge type


def one_type(g):
    """The untyped graph g given as a typed one: a single edge type, every edge of type 0."""
    return CSCGraph(g.indptr, g.indices, np.zeros(g.num_edges, np.uint8), np.array([0, g.num_nodes]), ("n",),
                    (("n", "to", "n"),))


def test_a_one_type_graph_samples_bitwise_as_the_untyped_one_with_and_without_exclusion(graph):
    typed1 = one_type(graph)
    src, dst = random_edges(graph, 6000, 16)
    pos = edge_positions(graph, src, dst)
    assert np.array_equal(edge_positions(typed1, src, dst, np.zeros(len(src), np.int64)), pos)
    seeds = seeds_of(graph, 300, 17)
    for k in KERNELS:
        for exclude in (None, pos):
            want = sample(graph, seeds, FANOUTS, seed=8, kernel=k, exclude=exclude)
            got = sample(typed1, seeds, FANOUTS, seed=8, kernel=k, exclude=exclude)
            assert all(mfg_equal(a, b) for a, b in zip(got, want)), (k, exclude is None)
            assert all(a.edge_types is None and not b.edge_types.any() for a, b in zip(want, got))


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["untyped", "typed"])
def test_vanilla_sampling_with_exclusion_equals_hybrid(tmp_path, kind):
    # each owner skips the requester's excluded edges (typed: of their edge type) into the
    # nodes it owns: the MFGs of hybrid sampling with the same exclusion, every kernel
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
    from fastsample.partition import partition_dataset
    from helpers import REPO, assert_checks, mpiexec

    if kind == "typed":
        write_typed_synthetic(tmp_path / "g", TYPED_PRESETS["hetero-tiny"], progress=False)
    else:
        write_synthetic(tmp_path / "g", SynthConfig(num_nodes=3000, avg_degree=10, num_classes=4, feature_dim=4),
                        progress=False)
    partition_dataset(tmp_path / "g", tmp_path / "p", 2, progress=False)
    proc = mpiexec(2, REPO / "tests" / "vanilla_worker.py", tmp_path / "p", "mpi",
                   *(["typed"] if kind == "typed" else []), "exclude", timeout=600)
    owners = ["numba"] + (["native"] if native_built() else [])
    assert_checks(proc, 2, [f"{owner}-step{step}-{check}" for owner in owners for step in range(3)
                            for check in ["rounds", *KERNELS]])
