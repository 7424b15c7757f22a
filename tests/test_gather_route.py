"""The gather's bookkeeping (fastsample/distributed/gather.py: _runs_of, _route, _by_run,
_place): the native kernels (native/route.cpp) give numpy's answers, and an id outside the
partition is refused rather than read as another type's row."""

from types import SimpleNamespace

import numpy as np
import pytest

import fastsample.distributed.gather as gather_module
from fastsample.distributed.gather import FeatureGather

from helpers import native_built, native_or_numpy


def a_gather(ranks: int = 3, types: int = 4, rank: int = 1) -> FeatureGather:
    """A gather over type runs of uneven sizes, one of them empty, for rank ``rank`` of ``ranks``."""
    sizes = np.random.default_rng(5).integers(1, 40, ranks * types)
    sizes[types + 1] = 0  # rank 1 owns no nodes of type 1
    runs = np.concatenate([[0], np.cumsum(sizes)])
    shards = {f"t{t}": np.zeros((sizes[rank * types + t], 2), np.float32) for t in range(types)}
    return FeatureGather(SimpleNamespace(rank=rank, size=ranks), runs, shards)


def answers(g: FeatureGather, ids: np.ndarray, keep: np.ndarray):
    run, rows = g._runs_of(ids)
    routed = g._route(ids)
    order, counts = g._by_run(run, keep)
    _, _, types, index, type_counts, which, offset = routed
    placed = g._place(order, types, index, type_counts, which.copy(), offset.copy())  # it writes offset
    return (run, rows, order, counts) + routed + placed


@pytest.mark.skipif(not native_built(), reason="native module not built")
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("num_types", [4, 1])
def test_native_routing_gives_numpys_answers(dtype, num_types, monkeypatch):
    g = a_gather(types=num_types)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, g.runs[-1], 5000).astype(dtype)
    keep = rng.random(len(ids)) < 0.4
    native = answers(g, ids, keep)
    monkeypatch.setattr(gather_module, "_native", None)
    plain = answers(g, ids, keep)
    for a, b in zip(native, plain):
        assert np.array_equal(a, b)
    run, rows, order, counts, run2, rows2, types, index, type_counts, which, offset = native[:11]
    placed_which, placed_offset = native[11:]
    assert np.all((g.runs[run] <= ids) & (ids < g.runs[run + 1])) and np.array_equal(rows, ids - g.runs[run])
    assert np.array_equal(order, np.flatnonzero(keep)[np.argsort(run[keep], kind="stable")])  # by run, stable
    assert np.array_equal(counts, np.bincount(run[keep], minlength=len(g.runs) - 1))
    # _route: the same runs and rows, each id's type, rank among its type, source and shard offset
    assert np.array_equal(run2, run) and np.array_equal(rows2, rows)
    assert np.array_equal(types, run % num_types)
    assert np.array_equal(type_counts, np.bincount(types, minlength=num_types))
    for t in range(num_types):
        assert np.array_equal(index[types == t], np.arange(type_counts[t]))
    assert np.array_equal(which, np.where(run // num_types == g.comm.rank, 0, 2))
    assert np.array_equal(offset, rows * g.row_bytes[types])
    # _place: the kept ids' rows back to back in order, then everything by type
    sizes = g.row_bytes[types[order]]
    received = offset.copy()
    received[order] = np.cumsum(sizes) - sizes
    by_type = np.argsort(types, kind="stable")
    assert np.array_equal(placed_offset, received[by_type]) and np.array_equal(placed_which, which[by_type])


@pytest.mark.skipif(not native_built(), reason="native module not built")
def test_native_placement_refuses_inconsistent_counts():
    g = a_gather()
    ids = np.arange(g.runs[-1], dtype=np.int64)
    _, _, types, index, counts, which, offset = g._route(ids)
    counts = counts.copy()
    counts[0] -= 1  # type 0's last id then has no slot
    with pytest.raises(ValueError, match="out of range"):
        g._place(np.empty(0, np.int64), types, index, counts, which, offset)


@pytest.mark.parametrize("native", [True, False])
def test_an_id_outside_the_partition_is_refused(native, monkeypatch):
    native_or_numpy(gather_module, native, monkeypatch)
    g = a_gather()
    for bad in (g.runs[-1], -1):
        with pytest.raises(ValueError, match=f"ids: {bad} is not a node of this partition"):
            g._runs_of(np.array([0, 3, bad], dtype=np.int64))
        with pytest.raises(ValueError, match=f"ids: {bad} is not a node of this partition"):
            g._route(np.array([0, 3, bad], dtype=np.int64))
