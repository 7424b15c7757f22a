"""Edge list -> CSC: both directions, merged duplicates, no self-loops, sorted neighbours."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastsample.data.edges import edges_to_csc, edges_to_csc_file, shrink_npy


def reference(src, dst, n, symmetric, self_loops):
    edges = set()
    for u, v in zip(src.tolist(), dst.tolist()):
        if u == v and not self_loops:
            continue
        edges.add((u, v))
        if symmetric:
            edges.add((v, u))
    return {v: sorted(u for u, w in edges if w == v) for v in range(n)}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), data=st.data(), symmetric=st.booleans(), self_loops=st.booleans())
def test_csc_matches_set_semantics(n, data, symmetric, self_loops):
    m = data.draw(st.integers(0, 120))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    g = edges_to_csc(src, dst, n, symmetric=symmetric, self_loops=self_loops)
    want = reference(src, dst, n, symmetric, self_loops)
    got = {v: g.indices[g.indptr[v]:g.indptr[v + 1]].tolist() for v in range(n)}
    assert got == want
    assert g.indices.dtype == np.int32 and g.indptr[0] == 0 and g.indptr[-1] == g.num_edges


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), data=st.data(), symmetric=st.booleans(), self_loops=st.booleans(),
       chunk=st.integers(1, 50), budget=st.sampled_from([12, 100, 1 << 30]))
def test_on_disk_build_equals_the_in_memory_one(tmp_path_factory, n, data, symmetric, self_loops, chunk, budget):
    # the bounded-memory path (edges spilled by destination range, each range placed,
    # sorted and deduplicated in memory, the file then cut to length) gives the very
    # arrays, and a valid .npy; a budget of 12 bytes makes a range of every node
    m = data.draw(st.integers(0, 120))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    want = edges_to_csc(src, dst, n, symmetric=symmetric, self_loops=self_loops)
    folder = tmp_path_factory.mktemp("csc")
    path = folder / "indices.npy"
    chunks = ((src[i:i + chunk], dst[i:i + chunk]) for i in range(0, m, chunk))
    indptr = edges_to_csc_file(chunks, n, path, symmetric=symmetric, self_loops=self_loops,
                               expected_edges=2 * m, budget=budget)
    np.testing.assert_array_equal(indptr, want.indptr)
    got = np.load(path)
    assert got.dtype == want.indices.dtype
    np.testing.assert_array_equal(got, want.indices)
    assert path.stat().st_size == len(got) * got.itemsize + 128  # the header, and nothing after the data
    assert [p.name for p in folder.iterdir()] == ["indices.npy"]  # the spill files are gone


def test_shrink_npy_refuses_to_grow(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(10, dtype=np.int64))
    shrink_npy(path, 4)
    np.testing.assert_array_equal(np.load(path), np.arange(4))
    with pytest.raises(ValueError, match="cannot shrink"):
        shrink_npy(path, 5)
