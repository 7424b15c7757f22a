"""Edge list -> CSC: both directions, merged duplicates, no self-loops, sorted neighbours."""

import numpy as np
from hypothesis import given, settings, strategies as st

from fastsample.data.edges import edges_to_csc


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
