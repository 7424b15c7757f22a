"""Planetoid: the real Cora numbers, and a loader that refuses foreign pickles."""

import os
import pickle
import shutil

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.planetoid import load_planetoid
from fastsample.graph import DatasetError, load_dataset


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
    (raw / "ind.cora.graph").write_bytes(pickle.dumps(_Exploit(), protocol=2))
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
