"""The stated balance (partition/balance.py): every node type, split and the in-edges held
within it whatever the partitioner left, inside the partitioner's cut rather than at the
cost of it, and the same partition every time for one seed."""

import json

import numpy as np
import pytest

from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from fastsample.data.graph import SPLITS, load_dataset
from fastsample.partition import partition_dataset
from fastsample.partition.assign import edge_cut, random_parts, symmetric_adjacency
from fastsample.partition.balance import TOLERANCE, balance, caps, in_edge_cap, type_cap
from fastsample.partition.refine import refine


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("balance")
    write_typed_synthetic(root / "hetero-small", TYPED_PRESETS["hetero-small"], progress=False)
    write_typed_synthetic(root / "hetero-tiny", TYPED_PRESETS["hetero-tiny"], progress=False)
    write_synthetic(root / "untyped", SynthConfig(num_nodes=3000, avg_degree=12, num_classes=5, feature_dim=8,
                                                  seed=11), progress=False)
    return root


def assert_within(ds, part, P):
    """Every type at most its cap per part, every split floor or floor + 1, in-edges within theirs."""
    g = ds.graph
    for name, a, b in zip(g.node_types, g.node_type_offset[:-1], g.node_type_offset[1:]):
        counts = np.bincount(part[a:b], minlength=P)
        assert counts.max() <= type_cap(b - a, P), (name, counts)
    for s in SPLITS:
        counts = np.bincount(part[np.asarray(getattr(ds, s))], minlength=P)
        assert counts.max() - counts.min() <= 1, (s, counts)
    degree = np.diff(np.asarray(g.indptr, np.int64))
    load = np.bincount(part, weights=degree, minlength=P)
    assert load.max() <= in_edge_cap(g.num_edges, P, int(degree.max())), load


@pytest.mark.parametrize("parts", [2, 4])
def test_a_typed_partition_keeps_the_partitioners_cut_with_every_type_within_5_percent(graphs, tmp_path, parts):
    # hetero-small, METIS: the balancing used to move 13k nodes and take the cut from METIS's
    # 18.9 % (with a constraint per type, papers 1.73x their mean) to 43.0 % (2 parts); now
    # the cut after balancing stays within a few % of METIS's own (measured 28.9 against 29.3)
    meta = partition_dataset(graphs / "hetero-small", tmp_path / "p", parts, method="metis", mode="hybrid",
                             progress=False)
    assert meta["edge_cut_fraction"] <= 1.05 * meta["partitioner_edge_cut_fraction"], meta["edge_cut_fraction"]
    assert meta["edge_cut_fraction"] < {2: 0.31, 4: 0.47}[parts]  # the old pass: 43.0 and 64.8 %
    assert set(meta["type_balance"]) == {"paper", "author", "institute", "fos"}
    assert max(meta["type_balance"].values()) <= 1 + TOLERANCE and meta["balance"]["edges"] <= 1 + TOLERANCE
    ds = load_dataset(graphs / "hetero-small")
    orig = np.load(tmp_path / "p" / "orig_ids.npy")
    part = np.empty(len(orig), np.int32)
    part[orig] = np.repeat(np.arange(parts), np.diff(meta["offsets"]))
    assert_within(ds, part, parts)
    assert edge_cut(ds.graph, part) == meta["edge_cut"]


@pytest.mark.parametrize("name", ["hetero-tiny", "untyped"])
@pytest.mark.parametrize("start", ["one part", "papers apart", "random"])
def test_balance_repairs_any_assignment_and_refine_only_lowers_the_cut(graphs, name, start):
    ds = load_dataset(graphs / name)
    g, P = ds.graph, 3
    adj = symmetric_adjacency(ds)
    part = {"one part": np.zeros(g.num_nodes, np.int32), "random": random_parts(g.num_nodes, P, 1),
            # the first type (papers) all in part 0 and the rest dealt out: a type far over its cap
            "papers apart": np.where(np.arange(g.num_nodes) < g.node_type_offset[1], 0,
                                     random_parts(g.num_nodes, P, 2)).astype(np.int32)}[start]
    limits = caps(ds, P)
    balance(adj, g.indptr, part, limits)
    assert_within(ds, part, P)
    before = edge_cut(g, part)
    moves, swaps = refine(adj, g.indptr, part, limits)
    assert_within(ds, part, P)
    assert edge_cut(g, part) <= before
    assert moves + swaps > 0 or start == "one part"  # from random there is always something to gain


def test_a_partition_is_the_same_for_the_same_seed(graphs, tmp_path):
    metas = [partition_dataset(graphs / "hetero-tiny", tmp_path / str(i), 3, method="metis", mode="hybrid",
                               seed=5, progress=False) for i in range(2)]
    assert np.array_equal(np.load(tmp_path / "0" / "orig_ids.npy"), np.load(tmp_path / "1" / "orig_ids.npy"))
    keep = ("edge_cut", "partitioner_edge_cut", "offsets", "type_runs", "moved_for_balance", "type_balance")
    assert [{k: m[k] for k in keep} for m in metas][0] == {k: metas[1][k] for k in keep}
    written = json.loads((tmp_path / "0" / "partition.json").read_text())
    assert written["balance_tolerance"] == TOLERANCE


def test_an_untyped_graph_is_the_one_type_case(graphs, tmp_path):
    # one node type: the type's cap is the node balance (5 %), and the report lists no named types
    from fastsample.partition.__main__ import format_report

    meta = partition_dataset(graphs / "untyped", tmp_path / "p", 4, method="metis", mode="hybrid", progress=False)
    assert meta["balance"]["nodes"] <= 1 + TOLERANCE and list(meta["type_balance"]) == ["_N"]
    assert meta["edge_cut_fraction"] <= 1.1 * meta["partitioner_edge_cut_fraction"]
    report = format_report(meta)
    assert not any(line.startswith("types") for line in report.splitlines())
    assert "metis's own before balancing" in report
