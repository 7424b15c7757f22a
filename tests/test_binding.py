"""The native binding never copies an argument silently: it refuses another dtype, and a
graph's index dtypes are fixed once when the graph is built (CSCGraph), so a sample call
on a graph built from mixed dtypes passes the binding the arrays converted then."""

import warnings

import numpy as np
import pytest

from fastsample.data.graph import CSCGraph
from fastsample.native import lib
from fastsample.sampling import sample, sample_neighbors
from helpers import mfg_equal

pytestmark = pytest.mark.skipif(lib is None, reason="fastsample._native is not built")


def _random_csc(num_nodes: int, degree: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    indptr = np.arange(0, (num_nodes + 1) * degree, degree, dtype=np.int64)
    return indptr, rng.integers(0, num_nodes, num_nodes * degree, dtype=np.int64)


def test_the_binding_refuses_index_arrays_of_another_dtype():
    indptr, indices = _random_csc(100, 3)
    keys = np.arange(2, dtype=np.uint64)
    fanouts = np.array([2, 2], dtype=np.int64)
    seeds = np.array([1, 5], dtype=np.int64)
    assert len(lib.sample_fused(indptr, indices, None, seeds, fanouts, keys, 1)) == 2  # matched: accepted
    types = np.zeros(len(indices), np.uint8)
    assert len(lib.sample_fused(indptr, indices, types, seeds, fanouts, keys, 1)) == 2  # typed, one type
    for bad in [(indptr.astype(np.int32), indices, None, seeds),            # no (int64 ids, int32 offsets) kernel
                (indptr, indices.astype(np.uint32), None, seeds.astype(np.uint32)),
                (indptr, indices, None, seeds.astype(np.int32)),            # seeds must match the ids
                (indptr, indices[::2], None, seeds),                        # not contiguous
                (indptr, indices, types.astype(np.int32), seeds)]:          # uint8 or int16 edge types only
        with pytest.raises(TypeError, match="incompatible function arguments"):
            lib.sample_fused(*bad, fanouts, keys, 1)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        lib.sample_fused(indptr, indices, None, seeds, fanouts.astype(np.int32), keys, 1)
    with pytest.raises(ValueError, match="types: one per entry of indices"):
        lib.sample_fused(indptr, indices, types[1:], seeds, fanouts, keys, 1)
    with pytest.raises(ValueError, match="an untyped graph"):
        lib.sample_fused(indptr, indices, None, seeds, fanouts, keys, 2)
    h = np.ones((4, 3), dtype=np.float64)  # float32 only
    with pytest.raises(TypeError, match="incompatible function arguments"):
        lib.mean_aggregate(np.array([0, 1], np.int64), np.array([0], np.int32), h, np.zeros((1, 3), np.float64))


def test_a_graph_of_mixed_dtypes_is_converted_once_when_built_and_samples_the_same():
    indptr, indices = _random_csc(1000, 4)
    matched = CSCGraph(indptr, indices)
    for ip, ix in [(indptr.astype(np.int32), indices), (indptr, indices.astype(np.uint32)),
                   (indptr.astype(np.uint64), indices.astype(np.int32))]:
        with pytest.warns(UserWarning, match="converted once"):
            g = CSCGraph(ip, ix)
        assert g.indices.dtype in (np.int32, np.int64) and g.indptr.dtype.itemsize >= g.indices.dtype.itemsize
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # sampling converts nothing more
            got = sample(g, [3, 7, 900], [3, 2], seed=1, kernel="native")
        want = sample(matched, [3, 7, 900], [3, 2], seed=1, kernel="native")
        assert all(mfg_equal(a, b) for a, b in zip(got, want))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the loaders' dtypes are used as they are
        CSCGraph(indptr.astype(np.int32), indices.astype(np.int32))
        CSCGraph(indptr, indices.astype(np.int32))
    with pytest.raises(TypeError, match="integer"):
        CSCGraph(indptr.astype(np.float64), indices)


def test_owner_side_choice_is_the_same_native_and_numba():
    indptr, indices = _random_csc(500, 6, seed=3)
    g = CSCGraph(indptr[100:201] - indptr[100], indices[indptr[100]:indptr[200]])  # nodes 100..199's rows
    nodes = np.array([100, 150, 199, 120], dtype=np.int64)  # rows 0..99 are nodes 100..199
    for fanout in (2, 6, -1):
        a = sample_neighbors(g, nodes, fanout, 12345, row_offset=100, kernel="native")
        b = sample_neighbors(g, nodes, fanout, 12345, row_offset=100, kernel="numba")
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert np.array_equal(np.diff(a[0]), [6, 6, 6, 6])


def test_a_graph_built_from_mixed_dtypes_is_converted_once_and_each_call_passes_its_own_arrays(monkeypatch):
    """The review's case: int32 indptr with int64 indices. Converting per call (the old
    binding) made a 2-seed call ~1000x slower on a large graph. Now the graph converts once,
    when built, and every sample call hands the binding those very arrays: no call copies.
    (A property, not a timing: timings belong in bench/, and a loaded machine makes them flaky.)"""
    indptr, indices = _random_csc(1000, 3)
    with pytest.warns(UserWarning, match="converted once"):
        mixed = CSCGraph(indptr.astype(np.int32), indices)
    assert mixed.indptr.dtype == np.int64 and mixed.indptr.flags.c_contiguous
    seen = []
    real = lib.sample_fused

    def spy(indptr, indices, *args):
        seen.append((indptr, indices))
        return real(indptr, indices, *args)

    monkeypatch.setattr(lib, "sample_fused", spy)
    for step in range(3):
        sample(mixed, [1, 2], [2, 2], step=step, kernel="native")
    assert len(seen) == 3 and all(a is mixed.indptr and b is mixed.indices for a, b in seen)
