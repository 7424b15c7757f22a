"""OGB raw layout, offline, on a directory the test writes itself."""

import gzip

import numpy as np
import pytest

from conftest import run_module
from fastsample.graph import DatasetError, load_dataset


def write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(map(str, row if isinstance(row, (list, tuple)) else [row])) + "\n")


@pytest.fixture
def ogb_root(tmp_path):
    root = tmp_path / "ogbn_toy"
    edges = [(0, 1), (1, 2), (2, 0), (3, 4), (1, 0), (2, 2)]  # (1,0) duplicates (0,1) once symmetric
    write_csv(root / "raw" / "edge.csv.gz", edges)
    write_csv(root / "raw" / "num-node-list.csv.gz", [6])
    write_csv(root / "raw" / "num-edge-list.csv.gz", [len(edges)])
    write_csv(root / "raw" / "node-feat.csv.gz", [[i, i + 0.5, -i] for i in range(6)])
    write_csv(root / "raw" / "node-label.csv.gz", [0, 1, 2, 1, "nan", 0])
    write_csv(root / "split" / "random" / "train.csv.gz", [0, 1])
    write_csv(root / "split" / "random" / "valid.csv.gz", [2])
    write_csv(root / "split" / "random" / "test.csv.gz", [3, 5])
    return root


def test_ogb_directory_converts(ogb_root, tmp_path):
    proc = run_module("fastsample.data", "ogb", ogb_root, tmp_path / "out", "--quiet")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(tmp_path / "out")
    g = ds.graph
    nbrs = {v: g.indices[g.indptr[v]:g.indptr[v + 1]].tolist() for v in range(6)}
    assert nbrs == {0: [1, 2], 1: [0, 2], 2: [0, 1], 3: [4], 4: [3], 5: []}
    assert np.allclose(ds.features[3], [3, 3.5, -3]) and ds.features.dtype == np.float32
    assert ds.labels.tolist() == [0, 1, 2, 1, -1, 0] and ds.num_classes == 3
    assert ds.train.tolist() == [0, 1] and ds.val.tolist() == [2] and ds.test.tolist() == [3, 5]


def test_ogb_directed_keeps_one_direction(ogb_root, tmp_path):
    run_module("fastsample.data", "ogb", ogb_root, tmp_path / "out", "--directed", "--quiet", check=True)
    g = load_dataset(tmp_path / "out").graph
    assert g.indices[g.indptr[0]:g.indptr[1]].tolist() == [1, 2]  # in-edges 1->0 and 2->0
    assert g.indices[g.indptr[1]:g.indptr[2]].tolist() == [0]


def test_ogb_errors_name_the_file(ogb_root, tmp_path):
    from fastsample.data.ogb import load_ogb

    write_csv(ogb_root / "raw" / "edge.csv.gz", [(0, 1), (1, 9)])
    with pytest.raises(DatasetError, match=r"edge\.csv\.gz: node ids span"):
        load_ogb(ogb_root)
    (ogb_root / "raw" / "node-feat.csv.gz").write_bytes(b"not gzip")
    write_csv(ogb_root / "raw" / "edge.csv.gz", [(0, 1)])
    with pytest.raises(DatasetError, match=r"node-feat\.csv\.gz: not a readable gzip"):
        load_ogb(ogb_root)
    (ogb_root / "split" / "other").mkdir()
    with pytest.raises(DatasetError, match=r"found \['other', 'random'\]; choose one with split=NAME"):
        load_ogb(ogb_root)  # the library names the parameter; the CLI, the flag
    proc = run_module("fastsample.data", "ogb", ogb_root, tmp_path / "out")
    assert proc.returncode == 2 and "choose one with --split NAME" in proc.stderr, proc.stderr
