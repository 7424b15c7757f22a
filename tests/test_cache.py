"""The hot-feature cache changes the bytes on the wire, and prefetch when the time is spent;
neither changes the results."""

import numpy as np
import pytest

from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.distributed.cache import CachedRows
from fastsample.loading import NodeLoader
from fastsample.partition import partition_dataset
from helpers import REPO, assert_checks, mpiexec, train_many

ARGS = ["--fanouts", "5,4", "--batch-size", "40", "--hidden", "16", "--epochs", "2", "--quiet", "--threads", "1",
        "--eval-every", "0"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    # its own graph: whether frequency beats degree at 5% depends on it (on the training
    # tests' seed-9 graph it does not: 0.40 vs 0.44)
    root = tmp_path_factory.mktemp("cache")
    write_synthetic(root / "g", SynthConfig(num_nodes=3000, avg_degree=8, num_classes=4, feature_dim=8,
                                            train_frac=0.1, seed=5), progress=False)
    for p in (1, 2, 3):
        partition_dataset(root / "g", root / f"p{p}", p, progress=False)
    return root


def train_all(root, ranks, runs: dict) -> dict:
    """{name: records} of several runs ({name: (log, extra flags)}) in one launch (helpers.train_many)."""
    return train_many(root / f"p{ranks}", ranks, {name: (log, [*ARGS, *extra]) for name, (log, extra) in runs.items()})


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 3])  # 2 ranks: test_data_path.py's matrix, every kernel and mode
def test_losses_are_bitwise_the_same_with_a_cache_or_prefetch_and_fewer_bytes_move(root, tmp_path, ranks):
    # {no cache, cache} x {no prefetch, prefetch} at every P; the other policy and mode where
    # they can differ (at P = 1 every row is owned and vanilla is hybrid), once (P = 3)
    variants = [("hybrid", "frequency", 0), ("hybrid", None, 1), ("hybrid", "frequency", 1)]
    if ranks == 3:
        variants += [("hybrid", "degree", 0), ("vanilla", "frequency", 0)]
    if ranks > 1:
        variants += [("vanilla", "frequency", 2)]
    flags = {(mode, policy, prefetch): ["--mode", mode, "--prefetch", str(prefetch)]
             + (["--cache-fraction", "0.2", "--cache-policy", policy] if policy else [])
             for mode, policy, prefetch in variants}
    # every run in one launch (the start-up once): the command line's main() per run
    runs = train_all(root, ranks, {"base": (tmp_path / "none.json", [])}
                     | {v: (tmp_path / f"{'-'.join(map(str, v))}.json", f) for v, f in flags.items()})
    base = runs["base"]
    for mode, policy, prefetch in variants:
        got = runs[(mode, policy, prefetch)]
        assert [r["step_losses"] for r in got] == [r["step_losses"] for r in base], (mode, policy, prefetch)
        if policy is None:
            assert [r["bytes_sent"] for r in got] == [r["bytes_sent"] for r in base]
        elif ranks > 1:
            assert all(r["bytes_sent"] < b["bytes_sent"] for r, b in zip(got, base)), (mode, policy)
            assert all(0 < r["cache_hit_rate"] <= 1 for r in got)
        else:  # one rank owns every row: nothing to cache
            assert all(r["cache_hit_rate"] == 0 for r in got)


@pytest.mark.mpi
@pytest.mark.slow
def test_frequency_beats_degree_and_a_bigger_cache_hits_more(root, tmp_path):
    runs = train_all(root, 2, {(p, f): (tmp_path / f"{p}{f}.json", ["--cache-fraction", str(f), "--cache-policy", p])
                               for p in ("degree", "frequency") for f in (0.05, 0.2)})
    rates = {key: records[-1]["cache_hit_rate"] for key, records in runs.items()}
    assert rates[("frequency", 0.05)] > rates[("degree", 0.05)], rates
    assert rates[("frequency", 0.2)] > rates[("frequency", 0.05)] and rates[("degree", 0.2)] > rates[("degree", 0.05)]


@pytest.mark.mpi
def test_cache_holds_the_owners_rows_of_the_best_scored_nodes_and_never_owned_ones(root):
    # 2 ranks, both policies and modes: every cached row equals the dataset's row, no
    # owned node is cached, no node left out scores higher than a kept one, and a gather
    # then fetches exactly the rows neither owned nor cached (cache_worker.py)
    proc = mpiexec(2, REPO / "tests" / "cache_worker.py", root / "g", root / "p2")
    assert_checks(proc, 2, [f"{m}-{p}" for m in ("hybrid", "vanilla") for p in ("degree", "frequency")])


def test_cache_lookup_and_bad_settings():
    cache = CachedRows(np.array([3, 9, 20]), np.zeros((3, 8), np.float32))
    assert cache.lookup(np.array([9, 4, 20, 21, 3, 0])).tolist() == [1, -1, 2, -1, 0, -1]
    # a slot table where it costs no more than the rows (wide rows), a binary search where
    # it would (ids far apart, narrow rows): the same positions
    rng = np.random.default_rng(0)
    ids = np.sort(rng.choice(10_000, 3_000, replace=False)) + 500
    queries = rng.integers(0, 11_000, 20_000)
    dense, sparse = CachedRows(ids, np.zeros((len(ids), 16), np.float32)), CachedRows(ids, np.zeros((len(ids), 1), np.int8))
    assert dense._slots is not None and sparse._slots is None
    want = [int(np.flatnonzero(ids == q)[0]) if q in set(ids.tolist()) else -1 for q in queries[:500]]
    for table in (dense, sparse):
        for dtype in (np.int64, np.int32):
            got = table.lookup(queries.astype(dtype))
            assert got.dtype == np.int64 and got[:500].tolist() == want
            assert np.array_equal(got, dense.lookup(queries))


def test_bad_cache_settings_name_the_parameter(root):
    with pytest.raises(ValueError, match="cache_policy must be one of frequency, degree"):
        NodeLoader(root / "p1", fanouts=[5, 4], batch_size=40, cache_fraction=0.1, cache_policy="random")
    with pytest.raises(ValueError, match=r"cache_fraction must be in \[0, 1\)"):
        NodeLoader(root / "p1", fanouts=[5, 4], batch_size=40, cache_fraction=1.0)
    one = NodeLoader(root / "p1", fanouts=[5, 4], batch_size=40, cache_fraction=0.3)
    one.warm_up()
    assert len(one.cache.ids) == 0  # one rank owns every row: nothing to cache
