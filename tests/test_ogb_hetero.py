"""OGB's heterogeneous layout (ogbn-mag's), converted offline from a small dataset written in
exactly that layout: typed graph, reverse relations, per-type features, nan labels, splits
local to the target type; every bad input one error naming the file and the type."""

import gzip
import shutil

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.ogb_hetero import load_ogb_hetero
from fastsample.data.graph import DatasetError, load_dataset
from fastsample.partition import load_partition, partition_dataset
from fastsample.sampling import sample

COUNTS = {"author": 7, "field_of_study": 4, "institution": 3, "paper": 9}
EDGES = {  # local ids, as OGB ships them
    "author___affiliated_with___institution": [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 1), (6, 0)],
    "author___writes___paper": [(0, 0), (0, 1), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (6, 7), (1, 8)],
    "paper___cites___paper": [(1, 0), (2, 0), (3, 1), (4, 2), (5, 2), (8, 7), (7, 6), (6, 5)],
    "paper___has_topic___field_of_study": [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 3), (8, 0)],
}


def _gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def write_mag(root, edges=EDGES, counts=COUNTS):
    raw = root / "raw"
    _gz(raw / "num-node-dict.csv.gz", ",".join(counts) + "\n" + ",".join(map(str, counts.values())) + "\n")
    for rel, pairs in edges.items():
        _gz(raw / "relations" / rel / "edge.csv.gz", "".join(f"{a},{b}\n" for a, b in pairs))
        _gz(raw / "relations" / rel / "num-edge-list.csv.gz", f"{len(pairs)}\n")
        _gz(raw / "relations" / rel / "edge_reltype.csv.gz", "".join("0\n" for _ in pairs))  # ignored
    feats = np.arange(counts["paper"] * 3, dtype=np.float32).reshape(-1, 3) / 4
    _gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", "".join(",".join(map(str, r)) + "\n" for r in feats))
    _gz(raw / "node-feat" / "paper" / "node_year.csv.gz", "".join("2010\n" for _ in feats))  # ignored
    labels = ["1", "0", "2", "nan", "1", "0", "2", "1", "0"]
    _gz(raw / "node-label" / "paper" / "node-label.csv.gz", "\n".join(labels) + "\n")
    for name, ids in (("train", [0, 1, 2, 4]), ("valid", [5, 6]), ("test", [7, 8])):
        _gz(root / "split" / "time" / "paper" / f"{name}.csv.gz", "".join(f"{i}\n" for i in ids))
    return feats


@pytest.fixture
def mag(tmp_path):
    feats = write_mag(tmp_path / "ogbn_mag")
    return tmp_path / "ogbn_mag", feats


def test_the_heterogeneous_layout_converts_with_reverse_relations(mag, tmp_path):
    root, feats = mag
    proc = run_module("fastsample.data", "ogb", root, tmp_path / "out", "--quiet")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(tmp_path / "out")
    g = ds.graph
    assert g.node_types == tuple(COUNTS) and np.diff(g.node_type_offset).tolist() == list(COUNTS.values())
    rels = sorted(EDGES)
    want_types = [e for r in rels for s, rel, d in [r.split("___")] for e in ((s, rel, d), (d, f"rev_{rel}", s))]
    assert list(g.edge_types) == want_types
    assert ds.target_type == "paper" and ds.num_classes == 3
    assert ds.features["author"] is None and np.array_equal(ds.features["paper"], feats)
    assert ds.labels.tolist() == [1, 0, 2, -1, 1, 0, 2, 1, 0]
    paper = int(g.node_type_offset[3])
    assert np.asarray(ds.train).tolist() == [paper + i for i in (0, 1, 2, 4)]
    # every given edge, and its reverse, with its type
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    have = set(zip(np.asarray(g.indices).tolist(), dst.tolist(), g.type_per_edge.tolist()))
    start = dict(zip(COUNTS, g.node_type_offset[:-1].tolist()))
    for r, rel in enumerate(rels):
        s, _, d = rel.split("___")
        for a, b in EDGES[rel]:
            if (s, a) == (d, b):
                continue  # a self-loop is dropped, as everywhere
            assert (start[s] + a, start[d] + b, 2 * r) in have and (start[d] + b, start[s] + a, 2 * r + 1) in have
    # directed: exactly the relations given
    run_module("fastsample.data", "ogb", root, tmp_path / "directed", "--directed", "--quiet")
    assert [":".join(e) for e in load_dataset(tmp_path / "directed").graph.edge_types] == \
        [r.replace("___", ":") for r in rels]
    # it partitions, samples on the partition, and trains with nothing else said (the
    # R-GCN; learnable embeddings for author, field_of_study and institution)
    partition_dataset(tmp_path / "out", tmp_path / "p2", 2, progress=False)
    part = load_partition(tmp_path / "p2", 0, 2)
    mfgs = sample(part.graph, np.asarray(part.train), [{"cites": 2, "*": 1}, 3])
    assert mfgs[-1].num_dst == len(part.train) and mfgs[0].edge_types is not None
    from helpers import train_records

    records = train_records(tmp_path / "p2", 2, tmp_path / "log.jsonl", "--epochs", "2", "--threads", "1",
                            "--quiet")
    assert len(records) == 2 and all(np.isfinite(r["loss"]) for r in records)


@pytest.mark.parametrize("breakage, message", [
    (lambda r: shutil.move(r / "raw/relations/paper___cites___paper", r / "raw/relations/journal___cites___paper"),
     r"journal___cites___paper: its source type 'journal' is not in .*num-node-dict.csv.gz"),
    (lambda r: write_mag(r, edges={**EDGES, "author___writes___paper": EDGES["author___writes___paper"] + [(0, 9)]}),
     r"author___writes___paper/edge.csv.gz: paper ids span \[0, 9\], outside 0..8 \(9 paper nodes\)"),
    (lambda r: _gz(r / "raw/relations/author___writes___paper/num-edge-list.csv.gz", "3\n"),
     r"num-edge-list.csv.gz: says 3 edges, .*edge.csv.gz has 10"),
    (lambda r: _gz(r / "raw/node-feat/paper/node-feat.csv.gz", "1,2,3\n"),
     r"node-feat/paper/node-feat.csv.gz: 1 rows, but paper has 9 nodes"),
    (lambda r: _gz(r / "split/time/paper/test.csv.gz", "12\n"),
     r"split/time/paper/test.csv.gz: paper ids span \[12, 12\], outside 0..8"),
    (lambda r: _gz(r / "raw/node-label/author/node-label.csv.gz", "0\n"),
     r"node-label: expected labels for one node type of .*, found \['author', 'paper'\]"),
])
def test_bad_heterogeneous_input_names_the_file_and_the_type(mag, tmp_path, breakage, message):
    root, _ = mag
    breakage(root)
    with pytest.raises(DatasetError, match=message):
        load_ogb_hetero(root)
    proc = run_module("fastsample.data", "ogb", root, tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
