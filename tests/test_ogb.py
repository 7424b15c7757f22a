"""OGB raw layout, offline, on a directory the test writes itself."""

import gzip
import io
import zipfile

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.graph import DatasetError, load_dataset


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


# ---------------------------------------------------------------- npz layout (ogbn-papers100M's)


N, E, F = 300, 2000, 5


@pytest.fixture
def toy():
    """A graph with duplicate edges and self-loops, unlabelled nodes and a time split."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 7, N).astype(np.float64)
    labels[rng.random(N) < 0.2] = np.nan
    labelled = rng.permutation(np.flatnonzero(~np.isnan(labels)))
    return {"edge_index": rng.integers(0, N, (2, E)), "node_feat": rng.standard_normal((N, F)).astype(np.float32),
            "labels": labels, "split": {"train": labelled[:100], "valid": labelled[100:130], "test": labelled[130:170]}}


def write_split(root, split):
    for name, ids in split.items():
        write_csv(root / "split" / "time" / f"{name}.csv.gz", ids.tolist())


def write_csv_layout(root, toy):
    write_csv(root / "raw" / "edge.csv.gz", toy["edge_index"].T.tolist())
    write_csv(root / "raw" / "num-node-list.csv.gz", [N])
    write_csv(root / "raw" / "node-feat.csv.gz", toy["node_feat"].astype(np.float64).tolist())  # exact as text
    write_csv(root / "raw" / "node-label.csv.gz", toy["labels"].tolist())
    write_split(root, toy["split"])


def write_npz_layout(root, toy, save=np.savez_compressed, order="C", **members):
    """raw/data.npz and raw/node-label.npz as ogbn-papers100M ships them; ``members``
    replaces or (as None) drops members of data.npz."""
    (root / "raw").mkdir(parents=True, exist_ok=True)
    data = {"edge_index": np.asarray(toy["edge_index"], order=order), "node_year": np.full((N, 1), 2020),
            "node_feat": np.asarray(toy["node_feat"], order=order),
            "num_nodes_list": np.array([N]), "num_edges_list": np.array([E]), **members}
    save(root / "raw" / "data.npz", **{k: v for k, v in data.items() if v is not None})
    save(root / "raw" / "node-label.npz", node_label=toy["labels"].astype(np.float32)[:, None])
    write_split(root, toy["split"])


def convert(root, out, symmetric=True):
    from fastsample.data.ogb import load_ogb

    load_ogb(root, symmetric=symmetric).write(out, name="toy")
    return load_dataset(out)


@pytest.mark.parametrize("save, order, chunk", [
    (np.savez, "C", None), (np.savez_compressed, "C", None),
    (np.savez, "C", 56), (np.savez_compressed, "C", 56),  # 3 edges a chunk: boundaries inside each row
    (np.savez, "F", 56), (np.savez_compressed, "F", 56),  # Fortran order: edges interleaved, features by column
])
@pytest.mark.parametrize("symmetric", [True, False])
def test_npz_layout_converts_like_the_csv_layout(toy, tmp_path, monkeypatch, save, order, chunk, symmetric):
    import fastsample.data.npz

    write_csv_layout(tmp_path / "csv", toy)
    write_npz_layout(tmp_path / "npz", toy, save, order)
    if chunk:
        monkeypatch.setattr(fastsample.data.npz, "CHUNK_BYTES", chunk)
    want = convert(tmp_path / "csv", tmp_path / "from-csv", symmetric)
    got = convert(tmp_path / "npz", tmp_path / "from-npz", symmetric)
    assert want.graph.num_edges > E // 2 and np.array_equal(want.features, toy["node_feat"])  # not vacuous
    for key in ("indptr", "indices"):
        a, b = getattr(want.graph, key), getattr(got.graph, key)
        assert a.dtype == b.dtype and np.array_equal(a, b), f"graph.{key} differs from the CSV layout's"
    for key in ("features", "labels", "train", "val", "test"):
        a, b = getattr(want, key), getattr(got, key)
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{key} differs from the CSV layout's"
    assert got.num_classes == want.num_classes == 7


def test_npz_layout_via_the_cli(toy, tmp_path):
    write_npz_layout(tmp_path / "ogbn_toy", toy)
    run_module("fastsample.data", "ogb", tmp_path / "ogbn_toy", tmp_path / "out", "--quiet", check=True)
    ds = load_dataset(tmp_path / "out")
    assert np.array_equal(ds.features, toy["node_feat"]) and ds.val.tolist() == sorted(toy["split"]["valid"])
    assert ds.meta["num_nodes"] == N and ds.meta["source"]["loader"] == "ogb"


@pytest.mark.parametrize("given, stored", [("float16", "float16"), ("float64", "float32")])
def test_npz_features_keep_float16_and_become_float32_otherwise(toy, tmp_path, given, stored):
    write_npz_layout(tmp_path / "ogbn_toy", toy, node_feat=toy["node_feat"].astype(given))
    features = convert(tmp_path / "ogbn_toy", tmp_path / "out").features
    assert features.dtype == stored and np.array_equal(features, toy["node_feat"].astype(given).astype(stored))


def test_npz_layout_is_preferred_when_both_are_present(toy, tmp_path):
    from fastsample.data.ogb import OgbNpz, load_ogb

    write_csv_layout(tmp_path, toy)
    assert not isinstance(load_ogb(tmp_path), OgbNpz)
    write_npz_layout(tmp_path, toy)
    assert isinstance(load_ogb(tmp_path), OgbNpz)
    for file in (tmp_path / "raw").iterdir():
        file.unlink()
    with pytest.raises(DatasetError, match=r"raw: no OGB graph: expected data\.npz .* or edge\.csv\.gz"):
        load_ogb(tmp_path)


def test_npz_errors_name_the_file_and_member(toy, tmp_path):
    from fastsample.data.ogb import load_ogb

    root, raw = tmp_path / "ogbn_toy", tmp_path / "ogbn_toy" / "raw"
    out = tmp_path / "out"

    def fails(pattern, write=False):
        with pytest.raises(DatasetError, match=pattern):
            load_ogb(root).write(out, name="toy") if write else load_ogb(root)
        assert not out.exists() and not list(tmp_path.glob(".out.tmp-*")), "a failed write left files behind"

    write_npz_layout(root, toy)
    whole = (raw / "data.npz").read_bytes()
    (raw / "data.npz").write_bytes(whole[:len(whole) // 2])
    fails(r"data\.npz: not a readable zip archive, truncated or corrupt")
    write_npz_layout(root, toy, node_feat=None)
    fails(r"data\.npz: member 'node_feat' missing \(the archive has \['edge_index', 'node_year', ")
    write_npz_layout(root, toy, edge_index=toy["edge_index"][:, :10].T.copy())
    fails(r"data\.npz: member 'edge_index': shape \(10, 2\), expected \(2, num_edges\)")
    write_npz_layout(root, toy, node_feat=toy["node_feat"].astype(np.int64))
    fails(r"data\.npz: member 'node_feat': int64 \(300, 5\), expected \(num_nodes, feature_dim\) floats")
    write_npz_layout(root, toy, num_nodes_list=np.array([N + 1]))
    fails(r"data\.npz: member 'num_nodes_list': \[301\], expected \[300\]")
    write_npz_layout(root, toy)
    np.savez(raw / "node-label.npz", node_label=toy["labels"][:-1, None])
    fails(r"node-label\.npz: member 'node_label': 299 labels, expected 300")

    # edge_index shorter than its header says, in an otherwise sound archive
    with zipfile.ZipFile(raw / "data.npz", "w") as zf:
        for name in ("edge_index", "node_feat"):
            npy = io.BytesIO()
            np.save(npy, toy[name])
            zf.writestr(f"{name}.npy", npy.getvalue()[:-8] if name == "edge_index" else npy.getvalue())
    fails(r"data\.npz: member 'edge_index': truncated "
          r"\(31992 bytes of data, its header \(2, 2000\) int64 needs 32000\)")

    # found only while streaming: an id out of range, damaged compressed data (the CRC)
    bad = toy["edge_index"].copy()
    bad[1, 1234] = N
    write_npz_layout(root, toy, edge_index=bad)
    fails(r"data\.npz: member 'edge_index': node ids span \[0, 300\] in edges 0\.\.1999, outside 0\.\.299", write=True)
    write_npz_layout(root, toy, edge_index=np.zeros((2, 100_000), dtype=np.int64),
                     num_edges_list=np.array([100_000]))  # compresses to a few hundred bytes
    data = bytearray((raw / "data.npz").read_bytes())
    with zipfile.ZipFile(raw / "data.npz") as zf:
        info = zf.getinfo("edge_index.npy")
    middle = info.header_offset + 30 + len(info.filename) + info.compress_size // 2  # inside the deflated data
    data[middle:middle + 8] = b"\xff" * 8
    (raw / "data.npz").write_bytes(data)
    fails(r"data\.npz: member 'edge_index': truncated or corrupt", write=True)
