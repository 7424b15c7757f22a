"""The typed (heterogeneous) dataset format: written, read back, summarised; every bad
input one error naming the file and the type; a one-type dataset unchanged."""

import json
import shutil

import numpy as np
import pytest

from conftest import make_small_dataset, run_module
from fastsample.data.edges import typed_edges_to_csc
from fastsample.data.synth_typed import EDGE_TYPES, NODE_TYPES, TYPED_PRESETS, TypedSynthConfig, write_typed_synthetic
from fastsample.data.graph import FORMAT_VERSION, DatasetError, load_dataset, write_dataset


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    return root / "h"


def test_the_generator_writes_a_typed_dataset_that_reads_back(typed):
    ds = load_dataset(typed)
    g = ds.graph
    meta = json.loads((typed / "meta.json").read_text())
    assert meta["format_version"] == 2 and ds.typed and ds.target_type == "paper"
    assert g.node_types == NODE_TYPES and g.edge_types == EDGE_TYPES and g.type_per_edge.dtype == np.uint8
    cfg = TYPED_PRESETS["hetero-tiny"]
    sizes = [cfg.papers, cfg.authors, cfg.institutes, cfg.fos]
    assert np.diff(g.node_type_offset).tolist() == sizes
    assert ds.features["institute"] is None and not (typed / "features" / "institute.npy").exists()
    assert ds.features["author"].shape == (cfg.authors, cfg.feature_dim) and ds.feature_dim == cfg.feature_dim
    assert len(ds.labels) == cfg.papers and ds.graph.node_type_offset[ds.target_index] == 0
    # every relation is there with its reverse, and each node's in-edges are sorted by type
    counts = np.bincount(g.type_per_edge, minlength=len(EDGE_TYPES))
    assert (counts > 0).all() and (counts[0::2] == counts[1::2]).all()
    for v in range(0, g.num_nodes, 97):
        t = g.type_per_edge[g.indptr[v]:g.indptr[v + 1]]
        assert np.all(np.diff(t.astype(int)) >= 0)
    # the same seed, the same bytes
    write_typed_synthetic(typed.parent / "again", TYPED_PRESETS["hetero-tiny"], progress=False)
    for f in sorted(p.relative_to(typed) for p in typed.rglob("*.npy")):
        assert (typed / f).read_bytes() == (typed.parent / "again" / f).read_bytes(), f


def test_info_summarises_types(typed):
    proc = run_module("fastsample.data", "info", typed)
    assert proc.returncode == 0, proc.stderr
    assert "node types  paper 2,000  author 3,000  institute 50 (featureless)  fos 200" in proc.stdout
    assert "author:affiliated_to:institute 3,000" in proc.stdout and "labelled paper nodes" in proc.stdout


def test_a_one_type_dataset_is_written_as_before(tmp_path):
    make_small_dataset(tmp_path / "d")
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION == 1 and "node_types" not in meta
    assert not (tmp_path / "d" / "type_per_edge.npy").exists() and not load_dataset(tmp_path / "d").typed


def _copy(typed, tmp_path):
    out = tmp_path / "bad"
    shutil.copytree(typed, out)
    return out, json.loads((out / "meta.json").read_text())


def _write_meta(path, meta):
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("change, message", [
    (lambda m: m["edge_types"].__setitem__(0, ["journal", "cites", "paper"]),
     r"meta.json: relation journal:cites:paper: its source type 'journal' does not exist"),
    (lambda m: m["node_type_offset"].__setitem__(2, 10),
     r"meta.json: node_type_offset must be 5 non-decreasing offsets from 0"),
    (lambda m: m.__setitem__("target_type", "venue"), r"meta.json: target_type 'venue' is not a node type"),
    (lambda m: m["features"].pop("fos"), r"meta.json: features must list every node type once.*fos"),
    (lambda m: m["features"].__setitem__("author", {"dim": 16, "dtype": "float32"}) or
     m["node_type_offset"].__setitem__(2, m["node_type_offset"][2] - 1),
     r"indices.npy: edge \d+ of relation \w+:\w+:\w+ has (source|destination) \d+, outside \w+'s ids"),
    (lambda m: m.__setitem__("format_version", 1), r"meta.json: format_version 1 has no node_types"),
])
def test_bad_typed_meta_is_one_error_naming_the_file_and_type(typed, tmp_path, change, message):
    path, meta = _copy(typed, tmp_path)
    change(meta)
    _write_meta(path, meta)
    with pytest.raises(DatasetError, match=message):
        load_dataset(path)


def test_bad_typed_arrays_name_the_file_and_type(typed, tmp_path):
    path, meta = _copy(typed, tmp_path)
    np.save(path / "features" / "author.npy", np.zeros((7, 16), np.float32))
    with pytest.raises(DatasetError, match=r"features/author.npy: shape \(7, 16\), expected \(3000, 16\)"):
        load_dataset(path)
    shutil.copy(typed / "features" / "author.npy", path / "features" / "author.npy")
    types = np.load(path / "type_per_edge.npy")
    types[:] = types[::-1]
    np.save(path / "type_per_edge.npy", types)
    with pytest.raises(DatasetError, match=r"type_per_edge.npy: node \d+'s in-edges are not sorted by edge type"):
        load_dataset(path)
    np.save(path / "type_per_edge.npy", np.load(typed / "type_per_edge.npy")[:-1])
    with pytest.raises(DatasetError, match=r"type_per_edge.npy: shape"):
        load_dataset(path)
    (path / "type_per_edge.npy").unlink()
    with pytest.raises(DatasetError, match=r"type_per_edge.npy: missing"):
        load_dataset(path)


def test_write_dataset_checks_a_typed_graph_before_writing(tmp_path):
    g = typed_edges_to_csc([0, 2], [2, 0], [0, 1], ["a", "b"], [0, 2, 3], [("a", "r", "b"), ("b", "rev_r", "a")])
    ok = dict(labels=np.array([0, 1]), train=[0], val=[1], test=[], name="t", num_classes=2, target_type="a")
    write_dataset(tmp_path / "ok", g, {"a": np.ones((2, 3), np.float32), "b": None}, **ok)
    assert load_dataset(tmp_path / "ok").features["b"] is None
    with pytest.raises(DatasetError, match=r"features\['a'\]=...\): float32 \(3, 3\), expected .* for the 2 nodes of type a"):
        write_dataset(tmp_path / "x", g, {"a": np.ones((3, 3), np.float32), "b": None}, **ok)
    with pytest.raises(DatasetError, match=r"features=...\): a typed graph takes \{node type: array or None\}"):
        write_dataset(tmp_path / "x", g, np.ones((3, 3), np.float32), **ok)
    with pytest.raises(DatasetError, match=r"train=...\): node ids span \[2, 2\], outside 0..1 \(the target"):
        write_dataset(tmp_path / "x", g, {"a": None, "b": None}, **{**ok, "train": [2]})
    with pytest.raises(DatasetError, match=r"target_type=...\): 'c' is not a node type"):
        write_dataset(tmp_path / "x", g, {"a": None, "b": None}, **{**ok, "target_type": "c"})
    assert not (tmp_path / "x").exists()


def test_the_typed_generator_checks_its_parameters_and_the_cli_its_flags(tmp_path):
    with pytest.raises(DatasetError, match="papers must be positive"):
        write_typed_synthetic(tmp_path / "x", TypedSynthConfig(papers=0), progress=False)
    proc = run_module("fastsample.data", "synth", "--preset", "hetero-tiny", "--nodes", "5", tmp_path / "y")
    assert proc.returncode == 2 and "--nodes: shape the untyped presets only" in proc.stderr
    assert not (tmp_path / "y").exists()


def test_infer_on_typed_data_without_its_embedding_shard_is_one_line(typed, tmp_path):
    from fastsample.partition import partition_dataset

    partition_dataset(typed, tmp_path / "p1", 1, progress=False)
    ck = tmp_path / "ck"
    proc = run_module("fastsample.train", "--data", tmp_path / "p1", "--epochs", "1", "--fanouts", "3,3", "--quiet",
                      "--checkpoint-dir", ck)
    assert proc.returncode == 0, proc.stderr
    (ck / "epoch-0.embed-0-of-1.pt").unlink()  # the featureless type's rows: inference cannot start without them
    proc = run_module("fastsample.infer", "--data", tmp_path / "p1", "--checkpoint", ck / "epoch-0.pt",
                      "--out", tmp_path / "out")
    assert proc.returncode != 0 and "epoch-0.embed-0-of-1.pt: missing" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "out").exists(), proc.stderr