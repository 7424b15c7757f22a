"""Typed (heterogeneous) sampling: each (node, edge type) segment sampled alone, with its
own fanout; every kernel gives the same typed MFGs, and a one-type graph samples bitwise
as the untyped rule does."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fastsample.data.edges import edges_to_csc, typed_edges_to_csc
from fastsample.data.graph import CSCGraph, DatasetError, validate_typed_edges
from fastsample.sampling import KERNELS, fanout_matrix, sample
from helpers import mfg_equal, native_built

ALL = [k for k in KERNELS if k != "native" or native_built()]
NODE_TYPES = ["paper", "author", "institute", "field"]
EDGE_TYPES = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "written_by", "author"),
              ("institute", "employs", "author"), ("author", "affiliated_with", "institute"),
              ("field", "topic_of", "paper"), ("paper", "has_topic", "field")]


def typed_graph(sizes, edges_per_type, seed, hubs=0):
    """A random typed graph over NODE_TYPES and EDGE_TYPES; ``hubs`` destinations of each
    relation get many in-edges (segments past the bitset's 4096, and runs of one type)."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    src, dst, etype = [], [], []
    for r, (s, _, d) in enumerate(EDGE_TYPES):
        si, di = NODE_TYPES.index(s), NODE_TYPES.index(d)
        m = edges_per_type + (5000 if hubs else 0)
        src.append(rng.integers(offsets[si], offsets[si + 1], m))
        d_ids = rng.integers(offsets[di], offsets[di + 1], m)
        d_ids[edges_per_type:] = offsets[di]  # a hub per relation
        dst.append(d_ids)
        etype.append(np.full(m, r))
    return typed_edges_to_csc(np.concatenate(src), np.concatenate(dst), np.concatenate(etype), NODE_TYPES, offsets,
                              EDGE_TYPES)


def check_typed(graph, seeds, fanouts, mfgs):
    """What the typed rule promises, checked against the graph itself."""
    F = fanout_matrix(graph, fanouts)
    assert np.array_equal(mfgs[-1].dst_ids, seeds)
    for layer, mfg in enumerate(mfgs):
        assert mfg.edge_types is not None and len(mfg.edge_types) == mfg.num_edges
        for i, v in enumerate(mfg.dst_ids):
            lo, hi = mfg.indptr[i], mfg.indptr[i + 1]
            got_types = mfg.edge_types[lo:hi]
            assert np.all(np.diff(got_types.astype(int)) >= 0), "a destination's edges in edge-type order"
            got_src = mfg.src_ids[mfg.indices[lo:hi]]
            a, b = graph.indptr[v], graph.indptr[v + 1]
            for r in range(graph.num_edge_types):
                nbrs = graph.indices[a:b][graph.type_per_edge[a:b] == r]
                picked = got_src[got_types == r]
                f = F[layer, r]
                assert set(picked) <= set(nbrs), "every sampled edge exists, with its type"
                assert len(np.unique(picked)) == len(picked), "without replacement"
                want = len(nbrs) if f < 0 or len(nbrs) <= f else f
                assert len(picked) == want, f"layer {layer} node {v} type {r}: {len(picked)} picks, fanout {f}"
                if want == len(nbrs):
                    assert np.array_equal(picked, nbrs), "all neighbours, in the graph's order"
        if layer + 1 < len(mfgs):
            assert np.array_equal(mfg.dst_ids, mfgs[layer + 1].src_ids)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 60), min_size=4, max_size=4), edges=st.integers(0, 300),
       fanouts=st.lists(st.one_of(st.sampled_from([-1, 1, 2, 5]),
                                  st.fixed_dictionaries({"cites": st.sampled_from([0, 1, 3, -1]),
                                                         "writes": st.sampled_from([0, 2, 7]),
                                                         "*": st.sampled_from([0, 1, 4, -1])})),
                        min_size=1, max_size=3),
       num_seeds=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_kernels_give_identical_valid_typed_mfgs(sizes, edges, fanouts, num_seeds, seed):
    graph = typed_graph(sizes, edges, seed % 1000)
    rng = np.random.default_rng(seed)
    seeds = rng.permutation(graph.num_nodes)[:num_seeds]
    results = {k: sample(graph, seeds, fanouts, seed=seed, epoch=1, step=2, rank=3, kernel=k) for k in ALL}
    check_typed(graph, seeds, fanouts, results["numba"])
    for k, mfgs in results.items():
        for layer, (a, b) in enumerate(zip(mfgs, results["numba"])):
            assert mfg_equal(a, b) and np.array_equal(a.edge_types, b.edge_types), f"{k} differs at layer {layer}"


@pytest.mark.parametrize("kernel", ALL)
def test_hub_segments_and_threads(kernel):
    # segments past the bitset (4096) and many destinations (several parallel chunks)
    from fastsample.sampling import get_num_threads, set_num_threads

    graph = typed_graph([3000, 2000, 300, 200], 20000, 7, hubs=True)
    seeds = np.arange(0, 3000, 3)
    fanouts = [{"cites": 10, "writes": 5, "*": 3}, 4]
    want = sample(graph, seeds, fanouts, seed=5, kernel="numba")
    check_typed(graph, seeds, fanouts, want)
    before = get_num_threads()
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            got = sample(graph, seeds, fanouts, seed=5, kernel=kernel)
            assert all(mfg_equal(a, b) and np.array_equal(a.edge_types, b.edge_types) for a, b in zip(got, want))
    finally:
        set_num_threads(before)


@pytest.mark.parametrize("kernel", ALL)
def test_a_one_type_graph_samples_bitwise_as_the_untyped_rule(kernel):
    rng = np.random.default_rng(3)
    n = 2000
    src, dst = rng.integers(0, n, 30000), rng.integers(0, n, 30000)
    plain = edges_to_csc(src, dst, n, symmetric=False)
    typed = typed_edges_to_csc(src, dst, np.zeros(len(src), np.int64), ["node"], [0, n], [("node", "to", "node")])
    assert np.array_equal(plain.indptr, typed.indptr) and np.array_equal(plain.indices, typed.indices)
    seeds = rng.permutation(n)[:300]
    for fanouts in ([10, 5], [{"to": 10}, -1]):
        a = sample(plain, seeds, [10, 5] if fanouts == [10, 5] else [10, -1], seed=9, step=4, kernel=kernel)
        b = sample(typed, seeds, fanouts, seed=9, step=4, kernel=kernel)
        assert all(mfg_equal(x, y) for x, y in zip(a, b))
        assert all(x.edge_types is None and not y.edge_types.any() for x, y in zip(a, b))


def test_edge_types_draw_from_streams_of_their_own():
    # two relations with the same neighbour lists into a node must not pick the same positions
    n = 300
    src = np.concatenate([np.arange(1, n), np.arange(1, n)])
    dst = np.zeros(2 * (n - 1), dtype=np.int64)
    etype = np.repeat([0, 1], n - 1)
    g = typed_edges_to_csc(src, dst, etype, ["a"], [0, n], [("a", "x", "a"), ("a", "y", "a")])
    (mfg,) = sample(g, [0], [5])
    picked = mfg.src_ids[mfg.indices]
    assert len(picked) == 10 and set(picked[:5]) != set(picked[5:])


def test_fanout_mappings_name_what_is_wrong():
    graph = typed_graph([5, 5, 5, 5], 20, 1)
    with pytest.raises(ValueError, match=r"layer 0: relation 'cited' is not an edge type \(the graph's: paper:cites"):
        sample(graph, [0], [{"cited": 2, "*": 1}])
    with pytest.raises(ValueError, match=r"layer 1 gives no fanout for paper:written_by:author \(name them, or give the rest"):
        sample(graph, [0], [2, {"cites": 1, "writes": 1, "employs": 1, "affiliated_with": 1, "topic_of": 1,
                                "has_topic": 1}])
    plain = CSCGraph(np.array([0, 1, 2]), np.array([1, 0]))
    with pytest.raises(ValueError, match=r"relation 'x' is not an edge type \(the graph's: _N:_E:_N\)"):
        sample(plain, [0], [{"x": 1}])
    # untyped data is the one-type case: its one relation takes a mapping like any other
    assert all(mfg_equal(a, b) for a, b in zip(sample(plain, [0, 1], [{"*": 1}], seed=2), sample(plain, [0, 1], [1], seed=2)))
    with pytest.raises(ValueError, match="a layer's mapping takes relation -> an integer >= -1"):
        sample(graph, [0], [{"cites": -3, "*": 1}])
    # the canonical form and the triple name the same relation
    a = sample(graph, [0, 1], [{"paper:cites:paper": 2, "*": 1}], seed=3)
    b = sample(graph, [0, 1], [{("paper", "cites", "paper"): 2, "*": 1}], seed=3)
    assert mfg_equal(a[0], b[0])
    dup = typed_edges_to_csc([0, 1], [1, 0], [0, 1], ["a", "b"], [0, 1, 2], [("a", "r", "b"), ("b", "r", "a")])
    with pytest.raises(ValueError, match="'r' names several edge types; write it as src:relation:dst"):
        sample(dup, [0], [{"r": 1}])


def test_typed_edges_out_of_their_types_range_are_named():
    with pytest.raises(DatasetError, match=r"relation a:r:b: source ids span \[1, 1\], outside a's ids 0..0"):
        typed_edges_to_csc([1], [1], [0], ["a", "b"], [0, 1, 2], [("a", "r", "b")])
    with pytest.raises(DatasetError, match=r"relation a:r:c: its destination type 'c' does not exist"):
        typed_edges_to_csc([0], [1], [0], ["a", "b"], [0, 1, 2], [("a", "r", "c")])
    g = typed_graph([5, 5, 5, 5], 30, 2)
    validate_typed_edges(g)
    types = g.type_per_edge.copy()
    v = int(np.flatnonzero(np.diff(g.indptr) >= 2)[0])  # a node with two in-edges of different types, swapped
    a = g.indptr[v]
    bad = CSCGraph(g.indptr, g.indices, types[::-1].copy(), g.node_type_offset, g.node_types, g.edge_types)
    with pytest.raises(DatasetError, match="not sorted by edge type|outside"):
        validate_typed_edges(bad)
    types[a] = len(EDGE_TYPES)
    with pytest.raises(DatasetError, match=r"edge type 7, but meta.json lists 7"):
        validate_typed_edges(CSCGraph(g.indptr, g.indices, types, g.node_type_offset, g.node_types, g.edge_types))


@pytest.mark.parametrize("budget", [1 << 30, 4096])
def test_the_on_disk_typed_build_equals_the_in_memory_one(tmp_path, budget):
    # bounded memory: typed edges spilled by destination range (several ranges with a
    # small budget, several chunks) give exactly typed_edges_to_csc's CSC and types
    from fastsample.data.edges import edges_to_csc_file

    rng = np.random.default_rng(5)
    sizes = [300, 200, 50, 40]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    src, dst, etype = [], [], []
    for r, (s, _, d) in enumerate(EDGE_TYPES):
        si, di = NODE_TYPES.index(s), NODE_TYPES.index(d)
        src.append(rng.integers(offsets[si], offsets[si + 1], 700))
        dst.append(rng.integers(offsets[di], offsets[di + 1], 700))
        etype.append(np.full(700, r))
    src, dst, etype = np.concatenate(src), np.concatenate(dst), np.concatenate(etype)
    want = typed_edges_to_csc(src, dst, etype, NODE_TYPES, offsets, EDGE_TYPES)
    chunks = [(src[i:i + 999], dst[i:i + 999], etype[i:i + 999]) for i in range(0, len(src), 999)]
    indptr = edges_to_csc_file(iter(chunks), int(offsets[-1]), tmp_path / "indices.npy", symmetric=False,
                               expected_edges=len(src), budget=budget, types_path=tmp_path / "types.npy",
                               num_types=len(EDGE_TYPES))
    assert np.array_equal(indptr, np.asarray(want.indptr, dtype=np.int64))
    assert np.array_equal(np.load(tmp_path / "indices.npy"), want.indices)
    assert np.array_equal(np.load(tmp_path / "types.npy"), want.type_per_edge)
    assert not list(tmp_path.glob("*.tmp"))
