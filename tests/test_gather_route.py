"""The gather's bookkeeping (fastsample/distributed/gather.py: _runs_of, _by_run): the
native kernels (native/route.cpp) give numpy's answers, and an id outside the partition
is refused rather than read as another type's row."""

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
    order, counts = g._by_run(run, keep)
    return run, rows, order, counts


@pytest.mark.skipif(not native_built(), reason="native module not built")
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_native_routing_gives_numpys_answers(dtype, monkeypatch):
    g = a_gather()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, g.runs[-1], 5000).astype(dtype)
    keep = rng.random(len(ids)) < 0.4
    native = answers(g, ids, keep)
    monkeypatch.setattr(gather_module, "_native", None)
    plain = answers(g, ids, keep)
    for a, b in zip(native, plain):
        assert np.array_equal(a, b)
    run, rows, order, counts = native
    assert np.all((g.runs[run] <= ids) & (ids < g.runs[run + 1])) and np.array_equal(rows, ids - g.runs[run])
    assert np.array_equal(order, np.flatnonzero(keep)[np.argsort(run[keep], kind="stable")])  # by run, stable
    assert np.array_equal(counts, np.bincount(run[keep], minlength=len(g.runs) - 1))


@pytest.mark.parametrize("native", [True, False])
def test_an_id_outside_the_partition_is_refused(native, monkeypatch):
    native_or_numpy(gather_module, native, monkeypatch)
    g = a_gather()
    for bad in (g.runs[-1], -1):
        with pytest.raises(ValueError, match=f"ids: {bad} is not a node of this partition"):
            g._runs_of(np.array([0, 3, bad], dtype=np.int64))
