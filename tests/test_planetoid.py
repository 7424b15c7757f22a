"""Planetoid: the real Cora numbers, and a loader that refuses foreign pickles."""

import os
import pickle
import shutil

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.planetoid import load_planetoid
from fastsample.data.graph import DatasetError, load_dataset


def test_cora_cli_gives_the_standard_dataset(planetoid_dir, tmp_path):
    out = tmp_path / "cora"
    proc = run_module("fastsample.data", "planetoid", planetoid_dir, "--name", "cora", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "2,708" in proc.stdout and "10,556" in proc.stdout
    ds = load_dataset(out)
    assert ds.graph.num_nodes == 2708 and ds.features.shape == (2708, 1433)
    assert ds.num_classes == 7 and (len(ds.train), len(ds.val), len(ds.test)) == (140, 500, 1000)
    # 5278 undirected citations, stored in both directions, no self-loops
    assert ds.graph.num_edges == 10556
    src = ds.graph.indices
    dst = np.repeat(np.arange(2708), np.diff(ds.graph.indptr))
    assert not (src == dst).any()
    forward = set(zip(src.tolist(), dst.tolist()))
    assert forward == {(v, u) for u, v in forward}, "every edge must be stored both ways"
    assert np.array_equal(np.asarray(ds.test), np.arange(1708, 2708))


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_pickle_with_a_foreign_class_is_refused(planetoid_dir, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(planetoid_dir, raw)
    (raw / "ind.cora.graph").chmod(0o644)
    (raw / "ind.cora.graph").write_bytes(pickle.dumps(_Exploit(), protocol=3))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(DatasetError) as err:
            load_planetoid(raw, "cora")
    finally:
        os.chdir(cwd)
    msg = str(err.value)
    assert "ind.cora.graph" in msg and "refused" in msg and "system" in msg, msg
    assert not (tmp_path / "pwned").exists(), "the payload must never run"


def test_missing_planetoid_file_is_named(planetoid_dir, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(planetoid_dir, raw)
    (raw / "ind.cora.ty").unlink()
    with pytest.raises(DatasetError, match=r"ind\.cora\.ty: missing"):
        load_planetoid(raw, "cora")


# ---------------------------------------------------------------- hand-made Planetoid files

def _csr_pickle(dense: np.ndarray) -> bytes:
    """A pickle of a scipy.sparse.csr_matrix, as the released files hold, without SciPy."""
    rows, cols = np.nonzero(dense)
    state = {"_shape": dense.shape, "indptr": np.searchsorted(rows, np.arange(dense.shape[0] + 1)).astype(np.int32),
             "indices": cols.astype(np.int32), "data": dense[rows, cols].astype(np.float32), "format": "csr"}
    body = pickle.dumps(state, protocol=3)[2:-1]  # no header, no STOP; no memo entries clash with ours
    return b"\x80\x03cscipy.sparse.csr\ncsr_matrix\n)\x81" + body + b"b."


def write_planetoid(raw, name, *, known, test_index, features, classes, train, edges, seed=0):
    """Raw ind.<name>.* files: `known` nodes in allx/ally, the first `train` of them in x/y,
    tx/ty rows for `test_index` (in its order), an adjacency dict of `edges` random pairs."""
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True, exist_ok=True)
    num_nodes = max(known, int(max(test_index)) + 1)
    feats = (rng.random((num_nodes, features)) < 0.01).astype(np.float32)
    onehot = np.eye(classes, dtype=np.int64)[rng.integers(0, classes, num_nodes)]
    tests = np.asarray(test_index)
    files = {"x": _csr_pickle(feats[:train]), "allx": _csr_pickle(feats[:known]), "tx": _csr_pickle(feats[tests]),
             "y": pickle.dumps(onehot[:train], protocol=3), "ally": pickle.dumps(onehot[:known], protocol=3),
             "ty": pickle.dumps(onehot[tests], protocol=3)}
    adjacency = {u: [] for u in range(num_nodes)}
    for u, v in rng.integers(0, num_nodes, (edges, 2)):
        adjacency[int(u)].append(int(v))
    files["graph"] = pickle.dumps(adjacency, protocol=3)
    for key, blob in files.items():
        (raw / f"ind.{name}.{key}").write_bytes(blob)
    (raw / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_index))
    return feats, onehot.argmax(1)


def citeseer_shaped(raw):
    """CiteSeer's published shape: 2,312 known nodes, 1,000 test ids spanning 2,312..3,326
    (a range of 1,015: 15 ids have no row anywhere), 3,703 features, 6 classes, 120 training
    nodes; the test index is not in id order."""
    rng = np.random.default_rng(7)
    span = np.arange(2312, 3327)
    gaps = np.sort(rng.choice(span[1:-1], 15, replace=False))  # keep both ends, as the release does
    test_index = rng.permutation(np.setdiff1d(span, gaps))
    feats, labels = write_planetoid(raw, "citeseer", known=2312, test_index=test_index, features=3703,
                                    classes=6, train=120, edges=4600)
    return test_index, gaps, feats, labels


def test_citeseer_shaped_files_load_with_gap_nodes(tmp_path):
    test_index, gaps, feats, labels = citeseer_shaped(tmp_path / "raw")
    out = tmp_path / "citeseer"
    proc = run_module("fastsample.data", "planetoid", tmp_path / "raw", "--name", "citeseer", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(out)
    assert ds.graph.num_nodes == 3327 and ds.features.shape == (3327, 3703) and ds.num_classes == 6
    assert (len(ds.train), len(ds.val), len(ds.test)) == (120, 500, 1000)
    # test node test_index[i] carries row i of tx/ty
    assert np.array_equal(ds.features[test_index], feats[test_index])
    assert np.array_equal(ds.labels[test_index], labels[test_index])
    assert np.array_equal(np.asarray(ds.test), np.sort(test_index))
    # the 15 gap nodes exist, with zero features and no label
    assert not ds.features[gaps].any() and (ds.labels[gaps] == -1).all()
    assert np.array_equal(ds.features[:2312], feats[:2312]) and np.array_equal(ds.labels[:2312], labels[:2312])


SMALL = dict(known=40, test_index=[52, 44, 47, 41, 50], features=6, classes=3, train=5, edges=80)
FILES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def _small(raw):
    write_planetoid(raw, "pubmed", **{**SMALL, "known": 510, "test_index": [515, 512, 518, 511, 516]})
    return raw


@pytest.mark.parametrize("victim", FILES)
def test_truncated_planetoid_file_is_one_dataset_error(tmp_path, victim):
    raw = _small(tmp_path / "raw")
    loaded = load_planetoid(raw, "pubmed")  # the intact files load, as a record of named arrays
    assert loaded.graph.num_nodes == len(loaded.features) == len(loaded.labels) == 519
    assert (len(loaded.train), len(loaded.val), len(loaded.test), loaded.num_classes) == (5, 500, 5, 3)
    file = raw / f"ind.pubmed.{victim}"
    blob = file.read_bytes()
    # (the text file's last byte is its final newline, whose loss changes nothing)
    for cut in (0, 1, len(blob) // 3, len(blob) // 2, len(blob) - (2 if victim == "test.index" else 1)):
        file.write_bytes(blob[:cut])
        with pytest.raises(DatasetError, match=rf"ind\.pubmed\.{victim}"):
            load_planetoid(raw, "pubmed")


def test_swapped_planetoid_files_never_raise_anything_but_dataset_error(tmp_path):
    raw = _small(tmp_path / "raw")
    blobs = {k: (raw / f"ind.pubmed.{k}").read_bytes() for k in FILES}
    refused = 0
    for a in FILES:
        for b in FILES:
            if a == b or blobs[a] == blobs[b]:
                continue
            (raw / f"ind.pubmed.{a}").write_bytes(blobs[b])
            try:
                load_planetoid(raw, "pubmed")
            except DatasetError as e:
                assert "ind.pubmed." in str(e), e
                refused += 1
            (raw / f"ind.pubmed.{a}").write_bytes(blobs[a])
    assert refused >= 50, refused  # almost every swap is inconsistent; the few that load are valid


@pytest.mark.parametrize("edit, message", [
    (lambda r: (r / "ind.pubmed.test.index").write_text("515\n515\n518\n511\n516\n"), r"test\.index: repeats"),
    (lambda r: (r / "ind.pubmed.test.index").write_text("515\n512\n"), r"test\.index: 2 ids, but ind\.pubmed\.tx has 5"),
    (lambda r: (r / "ind.pubmed.test.index").write_text("15\n512\n518\n511\n516\n"), r"test\.index: id 15 falls among"),
    (lambda r: (r / "ind.pubmed.test.index").write_text("a\nb\n"), r"test\.index: expected one integer"),
    (lambda r: (r / "ind.pubmed.graph").write_bytes(pickle.dumps({0: [1, 10**6]}, protocol=3)), r"graph: node ids span"),
    (lambda r: (r / "ind.pubmed.graph").write_bytes(pickle.dumps({0: 3}, protocol=3)), r"graph: expected integer"),
    (lambda r: (r / "ind.pubmed.ty").write_bytes(pickle.dumps(np.eye(4)[[0, 1, 2, 3, 0]], protocol=3)), r"ty: 4 columns"),
])
def test_inconsistent_planetoid_fields_name_the_file(tmp_path, edit, message):
    raw = _small(tmp_path / "raw")
    edit(raw)
    with pytest.raises(DatasetError, match=message):
        load_planetoid(raw, "pubmed")


def test_malformed_planetoid_input_is_one_line_from_the_cli(tmp_path):
    raw = _small(tmp_path / "raw")
    (raw / "ind.pubmed.tx").write_bytes((raw / "ind.pubmed.tx").read_bytes()[:40])
    proc = run_module("fastsample.data", "planetoid", raw, "--name", "pubmed", tmp_path / "out", "--quiet")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "ind.pubmed.tx" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
