"""The dataset directory format: round trip, atomic writes, and one clear error per defect."""

import json
import re

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.edges import edges_to_csc
from fastsample.data.graph import (CSCGraph, DatasetError, DatasetWriter, id_dtype, load_dataset, offset_dtype,
                              write_dataset)


def test_round_trip_is_memory_mapped_with_narrow_dtypes(small_dataset):
    ds = load_dataset(small_dataset)
    assert isinstance(ds.graph.indices, np.memmap) and isinstance(ds.features, np.memmap)
    assert ds.graph.indices.dtype == np.int32 and ds.graph.indptr.dtype == np.int32
    assert ds.graph.num_nodes == 50 and ds.graph.indptr[-1] == ds.graph.num_edges
    assert (len(ds.train), len(ds.val), len(ds.test)) == (10, 5, 10)


def test_index_dtypes_widen_only_past_int32():
    assert id_dtype(2**31 - 1) == np.int32 and id_dtype(2**31) == np.int64
    assert offset_dtype(2**31 - 1) == np.int32 and offset_dtype(2**31) == np.int64


def _expect_error(path, fragment, file):
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    msg = str(err.value)
    assert file in msg, f"error should name {file}: {msg}"
    assert fragment in msg, f"error should say {fragment!r}: {msg}"


def test_truncated_indices_names_the_file(small_dataset):
    f = small_dataset / "indices.npy"
    f.write_bytes(f.read_bytes()[:-40])
    _expect_error(small_dataset, "truncated", "indices.npy")


def test_wrong_dtype_names_the_file(small_dataset):
    indices = np.load(small_dataset / "indices.npy")
    np.save(small_dataset / "indices.npy", indices.astype(np.float64))
    _expect_error(small_dataset, "dtype float64", "indices.npy")


def test_out_of_range_id_names_the_file(small_dataset):
    indices = np.load(small_dataset / "indices.npy")
    indices[3] = 50
    np.save(small_dataset / "indices.npy", indices)
    _expect_error(small_dataset, "outside 0..49", "indices.npy")


def test_meta_disagreeing_with_arrays_names_the_file(small_dataset):
    meta = json.loads((small_dataset / "meta.json").read_text())
    meta["num_edges"] += 1
    (small_dataset / "meta.json").write_text(json.dumps(meta))
    _expect_error(small_dataset, "expected", "indices.npy")
    meta["num_edges"] -= 1
    meta["feature_dim"] = 7
    (small_dataset / "meta.json").write_text(json.dumps(meta))
    _expect_error(small_dataset, "(50, 7)", "features.npy")


def test_corrupt_meta_and_missing_file_are_named(small_dataset):
    (small_dataset / "labels.npy").unlink()
    _expect_error(small_dataset, "missing", "labels.npy")
    (small_dataset / "meta.json").write_text("{not json")
    _expect_error(small_dataset, "not valid JSON", "meta.json")


def test_non_monotone_indptr_and_overlapping_splits_are_refused(small_dataset):
    train = np.load(small_dataset / "train.npy")
    val = np.load(small_dataset / "val.npy")
    val[0] = train[0]
    np.save(small_dataset / "val.npy", val)
    _expect_error(small_dataset, "overlaps", "val.npy")
    indptr = np.load(small_dataset / "indptr.npy")
    indptr[10], indptr[11] = indptr[11] + 1, indptr[10]
    np.save(small_dataset / "indptr.npy", indptr)
    _expect_error(small_dataset, "monotone", "indptr.npy")


def test_interrupted_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with DatasetWriter(tmp_path / "ds") as w:
            w.save("indptr", np.zeros(3, np.int32))
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == [], "a failed write must not leave a directory behind"


def test_existing_directory_is_not_overwritten_silently(small_dataset):
    # the library speaks Python, the CLI its flags
    with pytest.raises(FileExistsError, match=r"already exists \(pass overwrite=True"):
        DatasetWriter(small_dataset)
    proc = run_module("fastsample.data", "synth", "--preset", "tiny", small_dataset, "--quiet")
    assert proc.returncode == 2 and proc.stderr == (f"python -m fastsample.data synth: error: {small_dataset}: "
                                                    "already exists (pass --overwrite to replace it)\n")


def test_overwrite_replaces_only_an_output_of_ours_leaving_nothing_beside_it(tmp_path):
    # --overwrite deleted whatever was at the path: a mistyped --out took a project's files
    from fastsample.atomic import AtomicDirectory, WouldDelete

    (tmp_path / "file").write_text("notes")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "train.py").write_text("")
    for target, says in (("file", "a file, not an output of fastsample"), ("project", "a directory that is not an "
                         "output of fastsample (it holds no meta.json, partition.json or index.json)")):
        with pytest.raises(WouldDelete, match=re.escape(f"{tmp_path / target}: {says}")):
            AtomicDirectory(tmp_path / target, overwrite=True)
    assert (tmp_path / "file").read_text() == "notes" and (tmp_path / "project" / "train.py").exists()
    (tmp_path / "empty").mkdir()
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours" / "meta.json").write_text("{}")
    for target in ("empty", "ours"):
        with AtomicDirectory(tmp_path / target, overwrite=True) as out:
            (out.tmp / "a").write_text("")
            out.commit()
        assert [p.name for p in (tmp_path / target).iterdir()] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file", "ours", "project"]


def test_a_target_that_cannot_be_written_is_said_so_naming_it(tmp_path, monkeypatch):
    # errno's text named a hidden lock file, or a full disk where the place was read-only
    import os

    from fastsample import atomic

    (tmp_path / "afile").write_text("")
    with pytest.raises(atomic.NotWritable, match=r"afile/sub/out: cannot be written \(\S+afile is a file, not a "
                                                 r"directory\)$"):
        atomic.AtomicDirectory(tmp_path / "afile" / "sub" / "out")
    with pytest.raises(atomic.NotWritable, match=r"/proc/out: cannot be written \(No such file or directory in "
                                                 r"/proc\)$"):
        atomic.check_space("/proc", 1 << 20, "out")  # /proc counts no space: not "no space left"
        atomic.AtomicDirectory("/proc/out")
    statvfs = os.statvfs
    monkeypatch.setattr(os, "statvfs", lambda p: os.statvfs_result(
        statvfs(p)[:8] + (statvfs(p).f_flag | os.ST_RDONLY,) + statvfs(p)[9:]))
    with pytest.raises(atomic.NotWritable, match=r"ds: cannot be written \(\S+ is on a read-only file system\)$"):
        atomic.check_space(tmp_path, 10, "ds")
    assert list(tmp_path.iterdir()) == [tmp_path / "afile"]


def _arrays(n=30, seed=0):
    rng = np.random.default_rng(seed)
    graph = edges_to_csc(rng.integers(0, n, 90), rng.integers(0, n, 90), n, symmetric=True)
    return dict(graph=CSCGraph(graph.indptr.astype(np.int64), graph.indices.astype(np.int64)),
                features=rng.standard_normal((n, 3)).astype(np.float32), labels=rng.integers(0, 3, n),
                train=np.arange(0, 10, dtype=np.int64), val=np.arange(10, 15), test=np.arange(15, 25))


def test_write_dataset_stores_ids_as_int32_and_round_trips(tmp_path):
    a = _arrays()
    write_dataset(tmp_path / "ds", **a, name="mine", num_classes=3)
    ds = load_dataset(tmp_path / "ds")
    assert ds.graph.indices.dtype == np.int32 and ds.graph.indptr.dtype == np.int32 and ds.train.dtype == np.int32
    assert np.array_equal(ds.graph.indices, a["graph"].indices) and np.array_equal(ds.test, a["test"])
    assert np.array_equal(ds.labels, a["labels"]) and ds.labels.dtype == np.int64


def _bad(a, key, value):
    return {**a, key: value}


@pytest.mark.parametrize("change, message", [
    (lambda a: _bad(a, "labels", np.full(30, 3)), r"write_dataset\(labels=...\): labels span \[3, 3\], expected -1"),
    (lambda a: _bad(a, "labels", np.zeros(29, np.int64)), r"labels=...\): int64 \(29,\), expected integers \(or float targets\) \(30,\)"),
    (lambda a: _bad(a, "labels", np.zeros(30)), r"num_classes=...\): .* \(labels float64\), got 3"),
    (lambda a: _bad(a, "features", np.zeros((30, 3))), r"features=...\): float64 \(30, 3\), expected float32 or float16"),
    (lambda a: _bad(a, "features", np.zeros((31, 3), np.float32)), r"features=...\): float32 \(31, 3\)"),
    (lambda a: _bad(a, "val", np.arange(5, 12)), r"val=...\): overlaps an earlier split"),
    (lambda a: _bad(a, "test", np.array([20, 21, 20])), r"test=...\): repeats a node id"),
    (lambda a: _bad(a, "test", np.array([29, 30])), r"test=...\): node ids span \[29, 30\], outside 0..29"),
    (lambda a: _bad(a, "train", np.array([0.0, 1.0])), r"train=...\): expected a 1-D integer array"),
    (lambda a: {**_bad(a, "labels", np.where(np.arange(30) == 3, -1, a["labels"]))}, r"train=...\): contains unlabelled"),
    (lambda a: _bad(a, "graph", CSCGraph(a["graph"].indptr, a["graph"].indices + 1)), r"graph.indices=...\): node ids span"),
    (lambda a: _bad(a, "graph", CSCGraph(a["graph"].indptr[::-1].copy(), a["graph"].indices)), r"graph.indptr=...\): must start at 0"),
    (lambda a: _bad(a, "num_classes", 0), r"num_classes=...\): expected a positive integer"),
])
def test_write_dataset_rejects_bad_arrays_before_writing(tmp_path, change, message):
    out = tmp_path / "nested" / "ds"
    with pytest.raises(DatasetError, match=message):
        write_dataset(out, **change({**_arrays(), "num_classes": 3}), name="mine")
    assert list(tmp_path.iterdir()) == [], "a rejected write must leave nothing on disk"


def test_info_cli_exits_nonzero_with_one_line_naming_the_file(small_dataset):
    (small_dataset / "features.npy").write_bytes(b"garbage")
    proc = run_module("fastsample.data", "info", small_dataset)
    assert proc.returncode == 2
    assert "features.npy" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_file_given_as_a_dataset_is_said_to_be_a_file(tmp_path):
    from fastsample.data.graph import read_meta

    (tmp_path / "notes").write_text("")
    with pytest.raises(DatasetError, match=r"notes: not a dataset directory \(a file\)"):
        read_meta(tmp_path / "notes")
    with pytest.raises(DatasetError, match=r"gone: not a dataset directory \(does not exist\)"):
        read_meta(tmp_path / "gone")
