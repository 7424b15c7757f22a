"""IGB's heterogeneous processed layout (IGBH, MLPerf R-GAT's graph), converted from a small
graph written in exactly that layout: node counts per type, every relation and its reverse
edge by edge, cites symmetric with one self-loop per paper, features bitwise, labels, and
train/val ids equal to split_seeds.py's rule; every bad input one line naming the file."""

import re

import numpy as np
import pytest
import torch

from fastsample.data.__main__ import main as data_main
from fastsample.data.igb import load_igb
from fastsample.data.graph import DatasetError, load_dataset
from fastsample.partition import load_partition, partition_dataset

COUNTS = {"paper": 300, "author": 400, "institute": 20, "fos": 30, "journal": 12, "conference": 9}
WIDTHS = {"paper": 8, "author": 6, "institute": 4, "fos": 5, "journal": 3, "conference": 2}
BASE = [("paper", "cites", "paper"), ("paper", "written_by", "author"), ("author", "affiliated_to", "institute"),
        ("paper", "topic", "fos")]
LARGE = [("paper", "published", "journal"), ("paper", "venue", "conference")]


def write_igb(root, size="tiny", seed=0, headerless=()):
    """ROOT/SIZE/processed in IGB's layout: random edges with repeats, self-loops and
    citations given both ways; features of a width per type; both label files. Types in
    ``headerless`` get raw float32 node_feat.npy files (large and full's paper and author)
    and raw labels. Returns {type: features}, {relation: (E, 2) rows}, {"2K"/"19": labels}."""
    rng = np.random.default_rng(seed)
    out = root / size / "processed"
    large = size in ("large", "full")
    types = [t for t in COUNTS if large or t not in ("journal", "conference")]
    feats = {}
    for t in types:
        feats[t] = rng.standard_normal((COUNTS[t], WIDTHS[t])).astype(np.float32)
        (out / t).mkdir(parents=True)
        if t in headerless:
            feats[t].tofile(out / t / "node_feat.npy")
        else:
            np.save(out / t / "node_feat.npy", feats[t])
    edges = {}
    for s, rel, d in BASE + (LARGE if large else []):
        e = np.stack([rng.integers(0, COUNTS[s], 700), rng.integers(0, COUNTS[d], 700)], axis=1)
        e = np.concatenate([e, e[:50]])  # repeated rows
        if rel == "cites":
            e = np.concatenate([e, [[3, 3], [7, 7], [7, 7]], e[:40, ::-1]])  # self-loops, citations both ways
        edges[(s, rel, d)] = e.astype(np.int64)
        (out / f"{s}__{rel}__{d}").mkdir()
        np.save(out / f"{s}__{rel}__{d}" / "edge_index.npy", edges[(s, rel, d)])
    labels = {"2K": rng.integers(0, 2983, COUNTS["paper"]).astype(np.float32),
              "19": rng.integers(0, 19, COUNTS["paper"]).astype(np.float32)}
    for name, y in labels.items():
        if "paper" in headerless:
            y.tofile(out / "paper" / f"node_label_{name}.npy")
        else:
            np.save(out / "paper" / f"node_label_{name}.npy", y)
    return feats, edges, labels


def reference_split(n, validation_frac=0.005):
    """split_seeds.py, computed here on its own."""
    torch.manual_seed(42)
    shuffled = torch.randperm(n)
    n_train, n_val = int(n * 0.6), int(n * validation_frac)
    return shuffled[:n_train].numpy(), shuffled[n_train:n_train + n_val].numpy(), shuffled[n_train + n_val:].numpy()


def stored(ds):
    """{edge type: [(local source, local destination), ...]} of a typed dataset."""
    g = ds.graph
    start = dict(zip(g.node_types, g.node_type_offset[:-1].tolist()))
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    src, types = np.asarray(g.indices), np.asarray(g.type_per_edge)
    out = {}
    for r, (s, rel, d) in enumerate(g.edge_types):
        mine = types == r
        out[(s, rel, d)] = list(zip((src[mine] - start[s]).tolist(), (dst[mine] - start[d]).tolist()))
    return out


def convert(*argv):
    """python -m fastsample.data ARGV in this process: its exit status (its output: capsys)."""
    try:
        return data_main([str(a) for a in argv])
    except SystemExit as e:  # argparse's errors
        return e.code


def check_dataset(ds, feats, edges, labels, label_set="2K"):
    g = ds.graph
    types = list(feats)
    assert list(g.node_types) == types and np.diff(g.node_type_offset).tolist() == [COUNTS[t] for t in types]
    assert ds.target_type == "paper" and int(g.node_type_offset[0]) == 0
    forward = list(edges)
    rev = [(d, f"rev_{rel}", s) for s, rel, d in forward]
    want = [forward[0], *forward[1:4], *rev[1:4], *forward[4:], *rev[4:]]  # the reference's order
    assert list(g.edge_types) == want
    have = stored(ds)
    for e, pairs in have.items():
        assert len(pairs) == len(set(pairs)), f"{e}: duplicates kept"
    for (s, rel, d), rows in edges.items():
        given = set(map(tuple, rows.tolist()))
        if rel == "cites":
            loops = {(i, i) for i in range(COUNTS["paper"])}
            expect = {(a, b) for a, b in given if a != b} | {(b, a) for a, b in given if a != b} | loops
            assert set(have[(s, rel, d)]) == expect
            assert sum(a == b for a, b in have[(s, rel, d)]) == COUNTS["paper"]  # one self-loop per paper
        else:
            assert set(have[(s, rel, d)]) == given
            assert set(have[(d, f"rev_{rel}", s)]) == {(b, a) for a, b in given}
    for t in types:
        got = np.asarray(ds.features[t])
        assert got.dtype == np.float32 and got.tobytes() == feats[t].tobytes()
    assert np.array_equal(ds.labels, labels[label_set].astype(np.int64))
    assert ds.num_classes == int(labels[label_set].max()) + 1


@pytest.fixture
def igb(tmp_path):
    return tmp_path / "igbh", write_igb(tmp_path / "igbh")


def test_the_processed_layout_converts_as_the_reference_builds_it(igb, tmp_path, capsys):
    root, (feats, edges, labels) = igb
    assert convert("igb", root, tmp_path / "out", "--size", "tiny", "--quiet") == 0, capsys.readouterr().err
    ds = load_dataset(tmp_path / "out")
    check_dataset(ds, feats, edges, labels)
    train, val, _ = reference_split(COUNTS["paper"])
    assert np.array_equal(ds.train, np.sort(train)) and np.array_equal(ds.val, np.sort(val)) and len(ds.test) == 0
    assert len(val) == 1 and ds.meta["source"]["validation_frac"] == 0.005
    # info and the partitioner accept it, and a part samples by relation
    assert convert("info", tmp_path / "out") == 0
    assert "paper:cites:paper" in capsys.readouterr().out
    partition_dataset(tmp_path / "out", tmp_path / "p2", 2, progress=False)
    part = load_partition(tmp_path / "p2", 1, 2)
    assert len(part.train) + len(load_partition(tmp_path / "p2", 0, 2).train) == len(train)


def test_roots_labels_and_split_options(igb, tmp_path, capsys):
    root, (feats, edges, labels) = igb
    # ROOT/SIZE and the processed directory itself serve as ROOT too
    assert convert("igb", root / "tiny", tmp_path / "a", "--size", "tiny", "--labels", "19", "--validation-frac",
                   "0.1", "--test-rest", "--quiet") == 0, capsys.readouterr().err
    ds = load_dataset(tmp_path / "a")
    assert np.array_equal(ds.labels, labels["19"].astype(np.int64)) and ds.num_classes == int(labels["19"].max()) + 1
    for got, want in zip((ds.train, ds.val, ds.test), reference_split(COUNTS["paper"], 0.1)):
        assert np.array_equal(got, np.sort(want))
    same = load_igb(root / "tiny" / "processed", "tiny", "19", 0.1, True)
    assert all(np.array_equal(getattr(same, k), getattr(ds, k)) for k in ("train", "val", "test"))


def test_large_layout_with_headerless_files(tmp_path):
    """large/full: journal and conference with published and venue; paper's and author's
    features and the labels without .npy headers (counts given here: MLPerf's are 1e8+)."""
    feats, edges, labels = write_igb(tmp_path / "igbh", "large", seed=1, headerless=("paper", "author"))
    with pytest.raises(DatasetError, match=r"paper/node_feat.npy: no .npy header, and its 9600 bytes are not "
                                           r"100000000 rows of float32"):
        load_igb(tmp_path / "igbh", "large")
    counts = {"paper": 300, "author": 400}
    with pytest.raises(DatasetError, match=r"paper/node_feat.npy: 300 papers, but IGB full's 2K labels cover the "
                                           r"first 157675969"):  # the processed directory itself as ROOT
        load_igb(tmp_path / "igbh" / "large" / "processed", "full", headerless_counts=counts)
    layout = load_igb(tmp_path / "igbh", "large", headerless_counts=counts)
    layout.write(tmp_path / "out", name="igbh-large")
    ds = load_dataset(tmp_path / "out")
    check_dataset(ds, feats, edges, labels)
    assert len(ds.graph.edge_types) == 11
    train, val, _ = reference_split(COUNTS["paper"])
    assert np.array_equal(ds.train, np.sort(train)) and np.array_equal(ds.val, np.sort(val))


@pytest.mark.parametrize("breakage, argv, message", [
    (lambda p: (p / "paper__topic__fos" / "edge_index.npy").unlink(), (),
     r"paper__topic__fos/edge_index.npy: missing \(relation paper:topic:fos"),
    (lambda p: np.save(p / "paper__written_by__author" / "edge_index.npy", np.zeros((5, 3), np.int64)), (),
     r"paper__written_by__author/edge_index.npy: int64 \(5, 3\), expected \(edges, 2\)"),
    (lambda p: np.save(p / "paper__cites__paper" / "edge_index.npy", np.zeros((5, 2), np.float32)), (),
     r"paper__cites__paper/edge_index.npy: float32 \(5, 2\), expected relation paper:cites:paper, integer"),
    (lambda p: np.save(p / "paper__written_by__author" / "edge_index.npy", np.array([[0, 1], [299, 400]])), (),
     r"paper__written_by__author/edge_index.npy: author ids \(column 1\) span \[1, 400\] in rows 0..1, outside "
     r"0..399 \(400 author nodes"),
    (lambda p: np.save(p / "paper" / "node_label_2K.npy", np.zeros(299, np.float32)), (),
     r"paper/node_label_2K.npy: float32 \(299,\), expected \(300,\) labels: one per paper"),
    (lambda p: (p / "fos" / "node_feat.npy").unlink(), (),
     r"paper__topic__fos: relation paper:topic:fos needs fos nodes, but .*fos/node_feat.npy is missing"),
    (lambda p: None, ("--size", "huge"), r"argument --size: invalid choice: 'huge'"),
])
def test_bad_layouts_are_one_line_naming_the_file(igb, tmp_path, capsys, breakage, argv, message):
    root, _ = igb
    breakage(root / "tiny" / "processed")
    capsys.readouterr()
    status = convert("igb", root, tmp_path / "out", *(argv or ("--size", "tiny")), "--quiet")
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))  # nothing left behind
