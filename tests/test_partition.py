"""Partitioning: the relabelled layout is the same graph, balanced, and fails loudly."""

import json
import shutil

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.graph import SPLITS, CSCGraph, DatasetError, load_dataset
from fastsample.partition import PartitionError, load_partition, owner_of, partition_dataset
from fastsample.partition import kaminpar as kp
from fastsample.partition.memory import choose_method

P = 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "g"
    write_synthetic(path, SynthConfig(num_nodes=3000, avg_degree=12, num_classes=5, feature_dim=8,
                                      seed=11), progress=False)
    return path


@pytest.fixture(scope="module", params=["metis", "random", pytest.param("kaminpar", marks=pytest.mark.skipif(
    not kp.available(), reason="the kaminpar package is not installed (pip install 'fastsample[kaminpar]')"))])
def partitioned(request, dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("parts") / request.param
    partition_dataset(dataset, out, P, method=request.param, mode="both", progress=False)
    return out


def test_relabelled_graph_and_node_data_map_back_exactly(dataset, partitioned):
    ds = load_dataset(dataset)
    orig = np.load(partitioned / "orig_ids.npy")
    assert np.array_equal(np.sort(orig), np.arange(ds.graph.num_nodes)), "orig_ids is a permutation"
    shards = [load_partition(partitioned, r, P) for r in range(P)]
    g = shards[0].graph
    for new in range(g.num_nodes):
        mapped = np.sort(orig[g.indices[g.indptr[new]:g.indptr[new + 1]]])
        old = orig[new]
        assert np.array_equal(mapped, ds.graph.indices[ds.graph.indptr[old]:ds.graph.indptr[old + 1]]), \
            f"in-edges of new node {new} (old {old}) differ"
    features = np.concatenate([s.features for s in shards])
    labels = np.concatenate([s.labels for s in shards])
    assert np.array_equal(features, np.asarray(ds.features)[orig]), "feature rows map back exactly"
    assert np.array_equal(labels, np.asarray(ds.labels)[orig])


def test_every_node_has_one_owner_and_splits_are_even(dataset, partitioned):
    ds = load_dataset(dataset)
    orig = np.load(partitioned / "orig_ids.npy")
    shards = [load_partition(partitioned, r, P) for r in range(P)]
    offsets = shards[0].offsets
    assert offsets[0] == 0 and offsets[-1] == ds.graph.num_nodes and (np.diff(offsets) > 0).all()
    assert np.array_equal(owner_of(offsets, np.arange(ds.graph.num_nodes)),
                          np.repeat(np.arange(P), np.diff(offsets))), "ranges are contiguous"
    for s in SPLITS:
        counts = [len(getattr(sh, s)) for sh in shards]
        assert max(counts) - min(counts) <= 1, f"{s} counts per part {counts}"
        for r, sh in enumerate(shards):
            assert (owner_of(offsets, getattr(sh, s)) == r).all(), f"rank {r} {s} ids are its own"
        together = np.sort(orig[np.concatenate([getattr(sh, s) for sh in shards])])
        assert np.array_equal(together, np.sort(np.asarray(getattr(ds, s)))), f"{s} maps back"


def test_vanilla_parts_hold_exactly_their_in_edges_and_together_the_graph(partitioned):
    whole = load_partition(partitioned, 0, P, mode="hybrid").graph
    indptr, indices = [np.zeros(1, np.int64)], []
    for r in range(P):
        sh = load_partition(partitioned, r, P, mode="vanilla")
        lo, hi = sh.offsets[r], sh.offsets[r + 1]
        assert sh.graph is None and len(sh.local_graph.indptr) == hi - lo + 1
        assert np.array_equal(sh.local_graph.indices, whole.indices[whole.indptr[lo]:whole.indptr[hi]])
        indptr.append(np.asarray(sh.local_graph.indptr[1:], np.int64) + indptr[-1][-1])
        indices.append(sh.local_graph.indices)
    assert np.array_equal(np.concatenate(indptr), np.asarray(whole.indptr, np.int64))
    assert np.array_equal(np.concatenate(indices), whole.indices)


def test_metis_cuts_far_fewer_edges_than_random(dataset, tmp_path):
    cuts = {m: partition_dataset(dataset, tmp_path / m, 4, method=m, mode="hybrid", progress=False)
            for m in ("metis", "random")}
    assert cuts["metis"]["edge_cut_fraction"] < 0.5 * cuts["random"]["edge_cut_fraction"], \
        {m: c["edge_cut_fraction"] for m, c in cuts.items()}
    assert cuts["metis"]["balance"]["nodes"] <= 1.05 and cuts["metis"]["balance"]["edges"] <= 1.05, \
        cuts["metis"]["balance"]


@pytest.fixture
def copy(partitioned, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(partitioned, out)
    return out


def test_wrong_rank_count_is_named(copy):
    with pytest.raises(PartitionError, match=r"partition\.json: partition built for 3 ranks, but the job has 4"):
        load_partition(copy, 0, 4)


def test_missing_part_is_named(copy):
    shutil.rmtree(copy / "part-2")
    load_partition(copy, 1, P)  # other ranks are unaffected
    with pytest.raises(PartitionError, match=r"part-2: missing"):
        load_partition(copy, 2, P)


def test_corrupted_partition_json_is_named(copy):
    text = (copy / "partition.json").read_text()
    (copy / "partition.json").write_text(text[: len(text) // 2])
    with pytest.raises(PartitionError, match=r"partition\.json: not valid JSON"):
        load_partition(copy, 0, P)
    meta = json.loads(text)
    meta["offsets"][1] += 5
    (copy / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match=r"partition\.json: type_runs must be 4 non-decreasing offsets that start each part"):
        load_partition(copy, 0, P)
    meta["type_runs"] = meta["offsets"]  # agreeing, but not the parts' files
    (copy / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match=r"part-0/features\.npy: .* implies"):
        load_partition(copy, 0, P)
    meta["offsets"] = meta["offsets"][:-1]
    (copy / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match=r"partition\.json: num_parts, offsets and parts disagree"):
        load_partition(copy, 0, P)


def test_truncated_shard_is_named(copy):
    f = copy / "part-1" / "features.npy"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(PartitionError, match=r"rank 1: .*part-1/features\.npy: unreadable or truncated") as err:
        load_partition(copy, 1, P)
    assert isinstance(err.value.__cause__, DatasetError)  # the reading error, kept as the cause


def test_a_repeated_seed_and_an_unordered_vanilla_indptr_are_named(copy):
    # both were loaded: a repeat failed mid-run in sampling ("seeds must be unique", a
    # traceback), a non-monotone indptr trained a vanilla job on a corrupt graph (exit 0)
    load_partition(copy, 1, P, mode="vanilla")
    indptr = np.load(copy / "part-1" / "indptr.npy")
    indptr[5] = indptr[6] + 3
    np.save(copy / "part-1" / "indptr.npy", indptr)
    with pytest.raises(PartitionError, match=r"part-1/indptr\.npy: not monotone non-decreasing"):
        load_partition(copy, 1, P, mode="vanilla")
    train = np.load(copy / "part-0" / "train.npy")
    train[1] = train[0]
    np.save(copy / "part-0" / "train.npy", train)
    with pytest.raises(PartitionError, match=r"part-0/train\.npy: ids not strictly increasing \(a repeated id"):
        load_partition(copy, 0, P)
    train[1] = np.load(copy / "part-0" / "val.npy")[0]
    np.save(copy / "part-0" / "train.npy", np.sort(train))
    with pytest.raises(PartitionError, match=r"part-0/(train|val)\.npy: ids also in another split"):
        load_partition(copy, 0, P)


def test_a_class_past_the_logits_is_named(copy):
    labels = np.load(copy / "part-1" / "labels.npy")
    labels[3] = 99  # the model would fail at the step drawing it, with a traceback
    np.save(copy / "part-1" / "labels.npy", labels)
    with pytest.raises(PartitionError, match=r"part-1/labels\.npy: row 3: class 99 outside 0\.\.\d+ \(-1: unlabelled\)"):
        load_partition(copy, 1, P)


def test_library_errors_name_parameters_not_flags(dataset, tmp_path):
    for kwargs, message in ((dict(parts=0), r"^parts must be in 1\.\.3000"),
                            (dict(parts=2, method="kway"), r"^method must be one of auto, metis, kaminpar, random"),
                            (dict(parts=2, mode="mixed"), r"^mode must be one of hybrid, vanilla, both")):
        with pytest.raises(PartitionError, match=message):
            partition_dataset(dataset, tmp_path / "p", progress=False, **kwargs)
    assert not (tmp_path / "p").exists()


def test_cli_reports_quality_and_rejects_bad_arguments(dataset, tmp_path):
    proc = run_module("fastsample.partition", dataset, tmp_path / "p", "--parts", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "edge cut" in proc.stdout and "balance" in proc.stdout and "peak RSS" in proc.stdout
    proc = run_module("fastsample.partition", dataset, tmp_path / "q", "--parts", "0")
    assert proc.returncode == 2 and "--parts must be in 1..3000" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "q").exists()


def test_interrupted_partition_leaves_nothing(dataset, tmp_path, monkeypatch):
    import fastsample.partition.layout as layout

    def broken(graph, orig_ids, folder, **_):  # fails half-way through writing the topology
        (folder / "indptr.npy").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(layout, "relabel_graph_to", broken)
    with pytest.raises(RuntimeError):
        partition_dataset(dataset, tmp_path / "p", 2, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_auto_picks_metis_where_its_peak_fits_and_kaminpar_where_it_does_not():
    n, m = 8_000_000, 2 * 312_000_000  # the 312M-edge graph METIS could not hold in 19 GB
    assert choose_method(n, m, 24 * 2**30)[0] == "kaminpar"
    assert choose_method(2_400_000, 2 * 62_000_000, 24 * 2**30)[0] == "metis"
    method, why = choose_method(n, m, 24 * 2**30)
    assert "exceeds" in why and "KaMinPar needs about" in why


def test_auto_without_room_or_kaminpar_and_a_failing_metis_are_one_clear_error(dataset, tmp_path, monkeypatch):
    from fastsample.partition import layout

    monkeypatch.setattr(layout, "available_memory", lambda: 2**20)  # 1 MiB: METIS cannot fit
    monkeypatch.setattr(kp, "available", lambda: False)
    with pytest.raises(PartitionError, match=r"exceeds .* the kaminpar package is not installed"):
        partition_dataset(dataset, tmp_path / "a", P, progress=False)
    assert not (tmp_path / "a").exists()

    def out_of_memory(*args):
        raise RuntimeError("Caught an unknown exception!")  # what pymetis says when malloc fails

    monkeypatch.setattr(layout, "metis_parts", out_of_memory)
    with pytest.raises(PartitionError, match=r"metis failed on 3,000 nodes .* use method kaminpar \(about"):
        partition_dataset(dataset, tmp_path / "b", P, method="metis", progress=False)
    assert not (tmp_path / "b").exists()


@pytest.fixture(scope="module")
def directed(tmp_path_factory):
    """A directed dataset (one-way edges, some both ways, duplicates and self-loops in the
    input): its partition needs the symmetrised adjacency built."""
    from fastsample.data.edges import edges_to_csc
    from fastsample.data.graph import write_dataset

    rng = np.random.default_rng(5)
    n, m = 2000, 16000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    graph = edges_to_csc(np.concatenate([src, dst[:500]]), np.concatenate([dst, src[:500]]), n, symmetric=False,
                         self_loops=True)
    ids = rng.permutation(n)
    path = tmp_path_factory.mktemp("directed") / "g"
    write_dataset(path, graph, rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 3, n),
                  np.sort(ids[:300]), np.sort(ids[300:400]), np.sort(ids[400:500]), name="directed", num_classes=3,
                  symmetric=False, self_loops=True)
    return path


def test_the_symmetric_adjacency_is_built_by_range_exactly_as_in_memory(directed, tmp_path, monkeypatch):
    # a directed graph's adjacency goes through edges_to_csc_file into scratch (bounded
    # memory); with chunks of a few edges and ranges of a few nodes it must equal the
    # in-memory symmetrisation, and leave nothing behind in scratch
    from fastsample.data.edges import edges_to_csc
    from fastsample.partition import assign

    ds = load_dataset(directed)
    g = ds.graph
    assert not assign.is_symmetric(ds) and (g.indices == np.repeat(np.arange(g.num_nodes), g.in_degrees())).any()
    want = edges_to_csc(g.indices, np.repeat(np.arange(g.num_nodes), np.diff(g.indptr)), g.num_nodes,
                        symmetric=True)
    monkeypatch.setattr(assign, "_ADJ_CHUNK", 37)
    got = assign.symmetric_adjacency(ds, tmp_path, budget=4000)  # ~300 edges a range: ~100 ranges
    assert want.num_edges > g.num_edges  # not vacuous: edges were added and self-loops dropped
    assert np.array_equal(want.indptr, got.indptr) and np.array_equal(want.indices, got.indices)
    assert list(tmp_path.iterdir()) == []


def test_a_directed_graph_partitions_into_its_own_scratch(directed, tmp_path):
    for method in ["metis"] + (["kaminpar"] if kp.available() else []):
        meta = partition_dataset(directed, tmp_path / method, P, method=method, progress=False)
        assert meta["balance"]["nodes"] <= 1.05 and meta["edge_cut_fraction"] < (P - 1) / P
        assert sorted(p.name for p in (tmp_path / method).iterdir()) == \
            ["orig_ids.npy", "part-0", "part-1", "part-2", "partition.json", "topology"]


@pytest.mark.skipif(not kp.available(), reason="the kaminpar package is not installed")
def test_the_parhip_file_holds_the_graph_and_weights(dataset, tmp_path):
    import kaminpar

    from fastsample.partition.assign import symmetric_adjacency

    ds = load_dataset(dataset)
    adj = symmetric_adjacency(ds)
    weights = np.arange(adj.num_nodes, dtype=np.int64) + 1
    kp.write_parhip(tmp_path / "g.parhip", adj, weights)
    for compress in (False, True):
        g = kaminpar.load_graph(str(tmp_path / "g.parhip"), kaminpar.GraphFileFormat.PARHIP, compress=compress)
        assert (g.n(), g.m()) == (adj.num_nodes, adj.num_edges)
        for u in (0, 17, adj.num_nodes - 1):
            assert g.node_weight(u) == weights[u] and g.degree(u) == adj.indptr[u + 1] - adj.indptr[u]
            assert sorted(v for v, _ in g.neighbors(u)) == sorted(adj.indices[adj.indptr[u]:adj.indptr[u + 1]])


def _relabelled(graph, orig_ids):
    """The graph under new ids (node i is old node orig_ids[i]), in-neighbours sorted: the
    reference, one node at a time."""
    new_of_old = np.empty(len(orig_ids), dtype=np.int64)
    new_of_old[orig_ids] = np.arange(len(orig_ids))
    rows = [np.sort(new_of_old[graph.indices[graph.indptr[o]:graph.indptr[o + 1]]]) for o in orig_ids]
    return CSCGraph(np.concatenate([[0], np.cumsum([len(r) for r in rows])]), np.concatenate(rows))


@pytest.mark.parametrize("mode", ["both", "vanilla"])
def test_block_by_block_relabel_writes_what_the_in_memory_one_computes(dataset, tmp_path, monkeypatch, mode):
    # the layout relabels and writes the topology, and copies the feature shards, in row
    # blocks (bounded memory). With blocks of a few edges and rows, every file must equal
    # the one-block run's; the topology (hybrid and each vanilla part) must equal
    # the relabelling computed here, node by node; a vanilla-only layout keeps no topology/
    from fastsample.data.graph import load_dataset
    from fastsample.partition import layout, relabel

    partition_dataset(dataset, tmp_path / "whole", 3, mode=mode, progress=False)
    monkeypatch.setattr(relabel, "CHUNK_EDGES", 5)
    monkeypatch.setattr(layout, "_CHUNK_ROWS", 7)
    partition_dataset(dataset, tmp_path / "blocks", 3, mode=mode, progress=False)
    orig_ids = np.load(tmp_path / "whole" / "orig_ids.npy")
    want = _relabelled(load_dataset(dataset).graph, orig_ids)
    files = sorted(p.relative_to(tmp_path / "whole") for p in (tmp_path / "whole").rglob("*.npy"))
    assert files == sorted(p.relative_to(tmp_path / "blocks") for p in (tmp_path / "blocks").rglob("*.npy"))
    for f in files:
        assert (tmp_path / "whole" / f).read_bytes() == (tmp_path / "blocks" / f).read_bytes(), f
    if mode == "both":
        np.testing.assert_array_equal(np.load(tmp_path / "blocks" / "topology" / "indices.npy"), want.indices)
        np.testing.assert_array_equal(np.load(tmp_path / "blocks" / "topology" / "indptr.npy"), want.indptr)
    else:
        assert not (tmp_path / "blocks" / "topology").exists()
    offsets = json.loads((tmp_path / "blocks" / "partition.json").read_text())["offsets"]
    for k in range(3):
        lo, hi = offsets[k], offsets[k + 1]
        e_lo, e_hi = int(want.indptr[lo]), int(want.indptr[hi])
        np.testing.assert_array_equal(np.load(tmp_path / "blocks" / f"part-{k}" / "indices.npy"), want.indices[e_lo:e_hi])


def test_metis_out_of_memory_is_one_line_naming_the_alternative(tmp_path):
    # a real allocation failure, not a mock: METIS gets 100 MiB of address space beyond
    # what the process holds after its imports, on a graph it needs ~230 MiB for
    import subprocess
    import sys

    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=100_000, avg_degree=20, seed=1), progress=False)
    script = ("import resource, sys\n"
              "from fastsample.partition.__main__ import main\n"
              "import numba, pymetis\n"
              "vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize'))\n"
              "resource.setrlimit(resource.RLIMIT_AS, (vm + 100 * 2**20, vm + 100 * 2**20))\n"
              "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "g"), str(tmp_path / "p"), "--parts", "2",
                           "--method", "metis", "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m fastsample.partition: error: metis failed on 100,000 "
                                                   "nodes and "), proc.stderr
    assert "Memory allocation failed" in lines[0] and "use method kaminpar (about" in lines[0], lines[0]
    assert not (tmp_path / "p").exists()


def test_metis_runs_apart_so_sigterm_ends_the_command_and_a_partial_result_is_refused(tmp_path):
    # METIS takes SIGTERM as its own error signal while it runs (GKlib's gk_sigtrap): a
    # scheduler's SIGTERM became a partial partition, written, exit 0. It now runs in a child:
    # here a METIS that swallows SIGTERM, then one that returns a partition with an empty part
    import os
    import signal
    import subprocess
    import sys
    import time

    code = """
import os, signal, sys, time
import numpy as np, pymetis
from fastsample.data.graph import CSCGraph
from fastsample.partition import assign

def swallowing(*args, **kwargs):
    signal.signal(signal.SIGTERM, lambda *a: None)  # as METIS's trap takes it
    print(os.getpid(), flush=True)
    time.sleep(60)

def partial(*args, **kwargs):
    return 0, [0] * 6  # METIS interrupted: every node in part 0

pymetis.part_graph = {"swallowing": swallowing, "partial": partial}[sys.argv[1]]
adj = CSCGraph(np.array([0, 1, 2, 3, 4, 5, 6]), np.array([1, 0, 3, 2, 5, 4]))
try:
    assign.metis_parts(adj, np.ones(6, dtype=np.int64), 2)
except RuntimeError as e:
    print(e, flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", code, "swallowing"], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") and \
            open(f"/proc/{child}/stat").read().split()[2] != "Z":
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"
    out = subprocess.run([sys.executable, "-c", code, "partial"], capture_output=True, text=True, timeout=60)
    assert out.stdout == "METIS returned no valid partition into 2 parts (an empty or unknown part)\n", out
