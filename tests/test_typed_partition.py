"""Partitioning a typed graph: ids regrouped so each (rank, node type) owns one contiguous
run, every type and split balanced, each rank's per-type rows the dataset's own, and the
relabelled typed topology the same edge set with each node's in-edges still sorted by type."""

import json

import numpy as np
import pytest

from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from fastsample.data.graph import SPLITS, load_dataset
from fastsample.partition import PartitionError, load_partition, partition_dataset
from fastsample.partition import kaminpar as kp
from fastsample.partition.balance import type_cap
from fastsample.sampling import sample
from helpers import mfg_equal

P = 3
METHODS = ["metis", "random", pytest.param("kaminpar", marks=pytest.mark.skipif(
    not kp.available(), reason="the kaminpar package is not installed"))]


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed-partition")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    return root


def _edges(g, ids=None):
    """The typed edge set (source, destination, type), ids mapped through ``ids`` (new -> old)."""
    dst = np.repeat(np.arange(g.num_nodes), np.diff(np.asarray(g.indptr)))
    src = np.asarray(g.indices)
    if ids is not None:
        src, dst = ids[src], ids[dst]
    return set(zip(src.tolist(), dst.tolist(), np.asarray(g.type_per_edge).tolist()))


@pytest.mark.parametrize("method", METHODS)
def test_a_typed_partition_keeps_every_edge_row_and_label(typed, tmp_path, method):
    meta = partition_dataset(typed / "h", tmp_path / "p", P, method=method, progress=False)
    ds = load_dataset(typed / "h")
    G, T = ds.graph, len(ds.graph.node_types)
    orig = np.load(tmp_path / "p" / "orig_ids.npy")
    runs = np.asarray(meta["type_runs"])
    assert runs[0] == 0 and runs[-1] == G.num_nodes and np.all(np.diff(runs) >= 0)
    assert np.array_equal(runs[::T], meta["offsets"]), "each rank's runs start at its range"
    # every (rank, type) run holds exactly that type's nodes
    new_types = np.repeat(np.tile(np.arange(T), P), np.diff(runs))
    assert np.array_equal(new_types, G.node_type_of(orig))
    # each type within the stated balance (5 % over its mean: type_cap), each split exact
    for t in range(T):
        sizes = np.diff(runs)[t::T]
        assert sizes.sum() == np.diff(G.node_type_offset)[t] and sizes.max() <= type_cap(sizes.sum(), P), \
            (G.node_types[t], sizes)
    for s in SPLITS:
        sizes = [p[s] for p in meta["parts"]]
        assert max(sizes) - min(sizes) <= 1, (s, sizes)
    hybrid = [load_partition(tmp_path / "p", r, P, "hybrid") for r in range(P)]
    g = hybrid[0].graph
    assert _edges(g, orig) == _edges(G), "the same typed edges under new ids"
    for v in range(g.num_nodes):
        t = g.type_per_edge[g.indptr[v]:g.indptr[v + 1]]
        assert np.all(np.diff(t.astype(int)) >= 0), f"node {v}: in-edges not sorted by type"
    for r, part in enumerate(hybrid):
        for t, name in enumerate(G.node_types):
            a, b = runs[r * T + t], runs[r * T + t + 1]
            rows = orig[a:b] - G.node_type_offset[t]
            if ds.features[name] is None:
                assert part.features[name] is None
            else:
                assert np.array_equal(part.features[name], ds.features[name][rows]), (r, name)
        a, b = runs[r * T], runs[r * T + 1]  # paper, the target type, is type 0
        assert np.array_equal(part.labels, ds.labels[orig[a:b]])
        assert part.typed and part.target_type == "paper"
        for s in SPLITS:
            assert np.array_equal(np.sort(orig[getattr(part, s)]),
                                  np.sort(np.asarray(getattr(ds, s))[np.isin(getattr(ds, s), orig[a:b])]))
        # vanilla: the owned rows of the same topology, types included
        van = load_partition(tmp_path / "p", r, P, "vanilla").local_graph
        lo, hi = part.offsets[r], part.offsets[r + 1]
        e_lo, e_hi = g.indptr[lo], g.indptr[hi]
        assert np.array_equal(van.indices, g.indices[e_lo:e_hi])
        assert np.array_equal(van.type_per_edge, g.type_per_edge[e_lo:e_hi])


def test_typed_sampling_on_the_partition_is_the_datasets_under_new_ids(typed, tmp_path):
    # the relabelled graph samples with the typed rule: a node keeps its per-type picks'
    # counts; kernels agree on it
    partition_dataset(typed / "h", tmp_path / "p", 2, method="random", progress=False)
    g = load_partition(tmp_path / "p", 0, 2, "hybrid").graph
    seeds = np.arange(0, g.num_nodes, 11)
    a = sample(g, seeds, [{"cites": 3, "*": 2}, 4], seed=4, kernel="numba")
    b = sample(g, seeds, [{"cites": 3, "*": 2}, 4], seed=4, kernel="twostep")
    assert all(mfg_equal(x, y) and np.array_equal(x.edge_types, y.edge_types) for x, y in zip(a, b))


def test_a_damaged_type_table_is_named(typed, tmp_path):
    partition_dataset(typed / "h", tmp_path / "p", 2, method="random", progress=False)
    meta = json.loads((tmp_path / "p" / "partition.json").read_text())
    meta["type_runs"] = meta["type_runs"][:-1]
    (tmp_path / "p" / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match=r"partition.json: type_runs must be 9 non-decreasing offsets"):
        load_partition(tmp_path / "p", 0, 2)


@pytest.mark.mpi
def test_the_typed_gather_brings_every_types_rows_in_two_rounds(typed, tmp_path):
    from helpers import REPO, assert_checks, mpiexec

    partition_dataset(typed / "h", tmp_path / "p", 3, progress=False)
    proc = mpiexec(3, REPO / "tests" / "typed_gather_worker.py", typed / "h", tmp_path / "p")
    assert_checks(proc, 3, ["mixed", "own", "none", "float16"])


@pytest.mark.mpi
def test_typed_vanilla_sampling_equals_hybrid(typed, tmp_path):
    # the owner side picks per edge type with the requester's keys: the same typed MFGs
    # as hybrid sampling on the whole relabelled topology, in 2 rounds per lower layer
    from helpers import REPO, assert_checks, mpiexec, native_built

    partition_dataset(typed / "h", tmp_path / "p", 3, progress=False)
    proc = mpiexec(3, REPO / "tests" / "vanilla_worker.py", tmp_path / "p", "mpi", "typed")
    kernels = ["numba", "twostep"] + (["native"] if native_built() else [])
    owners = ["numba"] + (["native"] if native_built() else [])
    assert_checks(proc, 3, [f"{owner}-step{step}-{check}" for owner in owners for step in range(3)
                            for check in ["rounds", *kernels]])


def test_embedding_shards_saved_on_one_partition_are_refused_on_another(typed, tmp_path):
    # a featureless type's learnt rows are kept by partition row; on another partition of the
    # graph (same ranks) those rows are other nodes: loading them there is refused, not silent
    from fastsample.trainer import TrainConfig
    from fastsample.trainer.trainer import embeddings_for

    config = TrainConfig(data="d", embed_dim=4)
    tables = {}
    for method in ("metis", "random"):
        partition_dataset(typed / "h", tmp_path / method, 2, method=method, progress=False)
        tables[method] = embeddings_for(config, load_partition(tmp_path / method, 0, 2), 0, 2)
    assert list(tables["metis"].tables) == ["institute"]
    again = embeddings_for(config, load_partition(tmp_path / "metis", 0, 2), 0, 2)
    again.load_state_dict(tables["metis"].state_dict())  # the same partition: its own rows
    with pytest.raises(ValueError, match="saved on another partition of the graph"):
        tables["random"].load_state_dict(tables["metis"].state_dict())
