"""Sampling: every kernel gives the same, valid MFGs; the choice is uniform and keyed."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fastsample.data.edges import edges_to_csc
from fastsample.data.graph import CSCGraph
from fastsample.sampling import KERNELS, get_num_threads, sample, set_num_threads
from helpers import native_built, mfg_equal

ALL = [k for k in KERNELS if k != "native" or native_built()]


@pytest.fixture(autouse=True)
def thread_count_unchanged():
    """Every test leaves the kernels' thread count as it found it (a user's setting, or
    NUMBA_NUM_THREADS, must not be overwritten by a test's own choice)."""
    before = get_num_threads()
    yield
    assert get_num_threads() == before, f"the test left {get_num_threads()} threads; it found {before}"


def random_graph(rng, n, m, hubs=0, hub_degree=0):
    src = list(rng.integers(0, n, m))
    dst = list(rng.integers(0, n, m))
    for h in range(hubs):  # huge in-degree hubs
        src += list(rng.integers(0, n, hub_degree))
        dst += [h] * hub_degree
    return edges_to_csc(np.array(src), np.array(dst), n, symmetric=False)


def check_valid(graph: CSCGraph, seeds, fanouts, mfgs):
    """Each MFG is a CSC over real edges, chained layer to layer, in DGL's id order."""
    assert len(mfgs) == len(fanouts)
    assert np.array_equal(mfgs[-1].dst_ids, seeds), "the last MFG's destinations are the seeds"
    for layer, (mfg, fanout) in enumerate(zip(mfgs, fanouts)):
        ip, idx, src = mfg.indptr, mfg.indices, mfg.src_ids
        assert ip[0] == 0 and ip[-1] == len(idx) and (np.diff(ip) >= 0).all()
        assert len(ip) == mfg.num_dst + 1
        assert len(np.unique(src)) == len(src), "source ids are unique"
        assert ((idx >= 0) & (idx < mfg.num_src)).all()
        if layer + 1 < len(mfgs):
            assert np.array_equal(mfgs[layer + 1].src_ids, mfg.dst_ids), "layers chain"
        first_seen = []
        for i, v in enumerate(mfg.dst_ids):
            nbrs = graph.indices[graph.indptr[v]:graph.indptr[v + 1]]
            chosen = src[idx[ip[i]:ip[i + 1]]]
            want = len(nbrs) if fanout == -1 else min(len(nbrs), fanout)
            assert len(chosen) == want, f"layer {layer} node {v}: {len(chosen)} picks, want {want}"
            assert len(np.unique(chosen)) == len(chosen), "no duplicate neighbour per destination"
            assert np.isin(chosen, nbrs).all(), "every sampled edge exists in the graph"
            first_seen += [u for u in idx[ip[i]:ip[i + 1]] if u >= mfg.num_dst and u not in first_seen]
        assert first_seen == list(range(mfg.num_dst, mfg.num_src)), "new nodes in order of first appearance"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 60), m=st.integers(0, 300), hubs=st.integers(0, 2),
       fanouts=st.lists(st.sampled_from([-1, 1, 2, 3, 5, 8]), min_size=1, max_size=3),
       num_seeds=st.integers(1, 12), key=st.integers(0, 2**31), data=st.data())
def test_kernels_give_identical_valid_mfgs(n, m, hubs, fanouts, num_seeds, key, data):
    rng = np.random.default_rng(key)
    graph = random_graph(rng, n, m, hubs=min(hubs, n), hub_degree=200)
    seeds = rng.permutation(n)[: min(num_seeds, n)]
    step = data.draw(st.integers(0, 5))
    results = {k: sample(graph, seeds, fanouts, seed=key, step=step, kernel=k) for k in ALL}
    check_valid(graph, seeds, fanouts, results["numba"])
    for k, mfgs in results.items():
        for layer, (a, b) in enumerate(zip(mfgs, results["numba"])):
            assert mfg_equal(a, b), f"kernel {k} differs from numba at layer {layer}"


def test_identical_across_thread_counts_and_id_widths():
    rng = np.random.default_rng(1)
    graph = random_graph(rng, 20_000, 400_000, hubs=3, hub_degree=5000)
    wide = CSCGraph(graph.indptr.astype(np.int64), graph.indices.astype(np.int64))
    seeds = rng.permutation(20_000)[:2000]
    runs = []
    before = get_num_threads()
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            for k in ALL:
                runs += [(threads, k, sample(graph, seeds, [10, 10, 5], kernel=k)),
                         (threads, k + "-int64", sample(wide, seeds, [10, 10, 5], kernel=k))]
    finally:
        set_num_threads(before)
    ref = runs[0][2]
    assert ref[0].num_edges > 100_000  # large enough for the parallel relabel path
    for threads, k, mfgs in runs:
        for a, b in zip(mfgs, ref):
            assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices) \
                and np.array_equal(a.src_ids, b.src_ids), f"{k} with {threads} threads differs"


@pytest.mark.skipif(not native_built(), reason="the native kernel's map")
def test_the_hashed_node_map_gives_the_direct_maps_mfgs():
    # Graphs above 8M nodes get a hash table sized by the batch instead of an array over
    # every node (native/node_map.hpp); the limit is lowered here so that these take it.
    # Tables grow within a call (from 4096 entries), are reused by later calls, and ids
    # that are multiples of the table's size must not pile up in one run of slots.
    from fastsample.native import lib

    rng = np.random.default_rng(3)
    dense = random_graph(rng, 20_000, 400_000, hubs=3, hub_degree=5000)
    n = 1 << 22
    strided = edges_to_csc(rng.integers(0, 512, 60_000) * 4096, rng.integers(0, 512, 60_000) * 4096, n,
                           symmetric=False)
    cases = [(dense, rng.permutation(20_000)[:2000], [10, 10, 5]), (dense, np.arange(7), [-1, -1]),
             (strided, np.arange(0, n, 4096)[rng.permutation(512)[:100]], [5, 5, 5])]
    direct = [sample(g, seeds, f, kernel="native") for g, seeds, f in cases]
    before = lib.node_map_direct_limit(0)
    try:
        hashed = [sample(g, seeds, f, kernel="native") for g, seeds, f in cases for _ in range(2)]
        with pytest.raises(ValueError, match="seeds must be unique: node 5 appears more than once"):
            sample(dense, np.array([1, 5, 2, 5]), [3], kernel="native")
    finally:
        lib.node_map_direct_limit(before)
    assert direct[0][0].num_src > 10_000  # the table grew several times in one call
    for i, mfgs in enumerate(hashed):
        assert all(mfg_equal(a, b) for a, b in zip(mfgs, direct[i // 2])), f"case {i // 2} differs"


def chi2_critical(dof, z=3.09):
    """Wilson-Hilferty approximation of the chi-square quantile (z=3.09: p = 0.999)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize("kernel", ALL)
@pytest.mark.parametrize("degree", [200, 5000])  # the bitset path and the large-hub path
def test_choice_is_uniform_over_a_hubs_neighbours(kernel, degree):
    fanout, trials = 10, 3000
    # node 0's in-neighbours are nodes 1..degree; nobody else has any
    indptr = np.full(degree + 2, degree, np.int32)
    indptr[0] = 0
    graph = CSCGraph(indptr, np.arange(1, degree + 1, dtype=np.int32))
    counts = np.zeros(degree, np.int64)
    for step in range(trials):
        mfg = sample(graph, [0], [fanout], seed=7, step=step, kernel=kernel)[0]
        counts[mfg.src_ids[mfg.indices] - 1] += 1
    expected = trials * fanout / degree
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < chi2_critical(degree - 1), f"chi2 {chi2:.1f} over {degree - 1} dof: not uniform"


def test_choice_depends_on_every_key_field_and_only_on_it():
    rng = np.random.default_rng(2)
    graph = random_graph(rng, 500, 0, hubs=50, hub_degree=100)
    seeds = np.arange(50)
    base = dict(seed=1, epoch=2, step=3, rank=0)
    ref = sample(graph, seeds, [5], **base)[0]
    assert mfg_equal(sample(graph, seeds, [5], **base)[0], ref), "same key, same sample"
    for field in base:
        other = sample(graph, seeds, [5], **{**base, field: base[field] + 1})[0]
        assert not mfg_equal(other, ref), f"changing {field} must change the sample"
    # a node's choice does not depend on which other seeds are in the batch
    alone = sample(graph, [7], [5], **base)[0]
    row = ref.src_ids[ref.indices[ref.indptr[7]:ref.indptr[8]]]
    assert np.array_equal(alone.src_ids[alone.indices], row)


@pytest.mark.parametrize("kernel", ALL)
def test_bad_seeds_and_fanouts_are_clear_errors(kernel):
    graph = random_graph(np.random.default_rng(3), 100, 1000)
    with pytest.raises(ValueError, match="node 5 appears more than once"):
        sample(graph, [1, 5, 2, 5], [3], kernel=kernel)
    with pytest.raises(ValueError, match=r"outside 0\.\.99"):
        sample(graph, [1, 100], [3], kernel=kernel)
    with pytest.raises(ValueError, match="fanouts must be positive or -1"):
        sample(graph, [1], [3, 0], kernel=kernel)
    # the failed calls left no stale entries in the reused node map
    a = sample(graph, [1, 5, 2], [3, 3], kernel=kernel)
    b = sample(graph, [1, 5, 2], [3, 3], kernel="numba")
    assert all(mfg_equal(x, y) for x, y in zip(a, b))


def test_unknown_kernel_is_named():
    graph = random_graph(np.random.default_rng(3), 10, 10)
    with pytest.raises(ValueError, match="kernel must be one of"):
        sample(graph, [1], [3], kernel="fast")


@pytest.mark.parametrize("kernel", ALL)
def test_degree_edge_cases_against_the_fanout(kernel):
    # node v has in-degree degrees[v]; fanout 4: below, equal, just above, a hub, none
    degrees = [0, 3, 4, 5, 5000, 1]
    n = 6000
    rng = np.random.default_rng(4)
    dst = np.repeat(np.arange(len(degrees)), degrees)
    src = np.concatenate([rng.choice(np.arange(10, n), d, replace=False) for d in degrees])
    graph = edges_to_csc(src, dst, n, symmetric=False)
    seeds = np.arange(len(degrees))
    for fanouts in ([4], [-1], [4, 4]):
        mfgs = sample(graph, seeds, fanouts, kernel=kernel)
        check_valid(graph, seeds, fanouts, mfgs)
    single = sample(graph, [4], [4], kernel=kernel)[0]
    assert single.num_edges == 4 and single.num_src == 5


def test_concurrent_calls_do_not_interfere():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    graph = random_graph(rng, 5000, 100_000, hubs=2, hub_degree=3000)
    jobs = [(k, step, rng.permutation(5000)[:500]) for k in ALL for step in range(6)]
    expected = [sample(graph, s, [10, 5], step=step, kernel=k) for k, step, s in jobs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda j: sample(graph, j[2], [10, 5], step=j[1], kernel=j[0]), jobs))
    for (k, step, _), a, b in zip(jobs, got, expected):
        assert all(mfg_equal(x, y) for x, y in zip(a, b)), f"{k} step {step} differs when run concurrently"


@pytest.mark.parametrize("kernel", ALL[:2] if "native" in ALL else ALL[:1])
def test_sample_neighbors_refuses_nodes_outside_its_rows(kernel):
    from fastsample.sampling import sample_neighbors

    graph = CSCGraph(np.array([0, 1, 2, 3]), np.array([1, 2, 0]))  # 3 rows: nodes 10..12 with row_offset 10
    ip, picked, types = sample_neighbors(graph, np.array([10, 12], dtype=graph.indices.dtype), -1, 0, 10, kernel)
    assert picked.tolist() == [1, 0] and len(types) == 0  # an untyped graph's picks carry no edge types
    with pytest.raises(ValueError, match=r"nodes span \[10, 13\], outside the graph's rows 10..12"):
        sample_neighbors(graph, np.array([10, 13], dtype=graph.indices.dtype), -1, 0, 10, kernel)
