"""Results keyed by the user's ids: python -m fastsample.infer --format parquet on a dataset
built from tables writes every node type's rows under the tables' ids, the link scorer's
parameters beside them, and examples/retrieve.py reproduces the trained test MRR from them."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.tables import export as to_tables
from conftest import run_module
from fastsample.data.graph import load_dataset
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from helpers import REPO, run_commands
from fastsample.trainer.runlog import read_records


def _retrieve():
    spec = importlib.util.spec_from_file_location("retrieve", REPO / "examples" / "retrieve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tables_link(tmp_path_factory):
    """hetero-tiny written as tables with string ids, built back, link-split, partitioned for 2."""
    root = tmp_path_factory.mktemp("export")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    spec = to_tables(root / "h", root / "tables")
    for cmd in (("fastsample.data", "tables", spec, root / "built"),
                ("fastsample.data", "link-split", root / "built", root / "link", "--relation",
                 "author:rev_written_by:paper", "--negatives", "20"),
                ("fastsample.partition", root / "link", root / "link-2", "--parts", "2"),
                ("fastsample.partition", root / "built", root / "node-2", "--parts", "2")):
        proc = run_module(*cmd)
        assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.mpi
@pytest.mark.slow
def test_a_link_export_is_keyed_by_the_tables_ids_and_reproduces_the_test_mrr(tables_link, tmp_path):
    root = tables_link
    ck, log, out = tmp_path / "ck", tmp_path / "log.jsonl", tmp_path / "out"
    train, infer = run_commands(2, [
        ("fastsample.train", ["--data", root / "link-2", "--task", "link", "--epochs", "2", "--threads", "1",
                              "--quiet", "--checkpoint-dir", ck, "--log-json", log, "--hidden", "32"]),
        ("fastsample.infer", ["--data", root / "link-2", "--checkpoint", ck / "epoch-1.pt", "--out", out,
                              "--format", "parquet", "--node-types", "all", "--quiet"])], tmp_path / "runs")
    assert train.returncode == 0, train.stderr
    assert infer.returncode == 0, infer.stderr
    index = json.loads((out / "index.json").read_text())
    assert index["output"] == "embeddings" and index["head"]["kind"] == "mlp"
    ds = load_dataset(root / "h")
    for t in ds.graph.node_types:  # every type, every node once, under its table's id
        table = pq.read_table(out / t)
        n = int(ds.graph.node_type_offset[ds.graph.node_types.index(t) + 1] -
                ds.graph.node_type_offset[ds.graph.node_types.index(t)])
        assert sorted(table.column("id").to_pylist()) == sorted(f"{t}-{k}" for k in range(n))
        assert table.column("embeddings").type.list_size == 32
    head = np.load(out / "head.npz")
    assert sorted(head) == ["mlp.0.bias", "mlp.0.weight", "mlp.2.bias", "mlp.2.weight"]
    trained = read_records(log)[-1]["test_mrr"]
    retrieve = _retrieve()
    export = retrieve.Export(out)
    assert abs(retrieve.test_mrr(export, root / "link") - trained) < 1e-6
    best = retrieve.top_k(export, ("author", "rev_written_by", "paper"), "author-7", 5)
    assert len(best) == 5 and all(i.startswith("paper-") for i, _ in best)
    assert [s for _, s in best] == sorted((s for _, s in best), reverse=True)


@pytest.mark.mpi
def test_node_outputs_and_their_choices(tables_link, tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tables_link
    ck = tmp_path / "ck"
    shutil.copytree(root / "node-2", tmp_path / "short-2")  # an id map cut short (a copy gone wrong)
    short = tmp_path / "short-2" / "id_maps" / "author.parquet"
    pq.write_table(pq.read_table(short).slice(0, 5), short)
    # an id map repeating an id, one without its id column, and orig_ids.npy repeating a node: the
    # export was written keyed by them (exit 0), or failed once the inference was done
    for name in ("twice-2", "noid-2", "orig-2"):
        shutil.copytree(root / "node-2", tmp_path / name)
    twice, noid = (tmp_path / name / "id_maps" / "author.parquet" for name in ("twice-2", "noid-2"))
    table = pq.read_table(twice)
    ids = table.column("id").to_pylist()
    pq.write_table(table.set_column(0, "id", pa.array([ids[1]] + ids[1:])), twice)
    pq.write_table(table.rename_columns(["key", *table.column_names[1:]]), noid)
    orig = np.load(tmp_path / "orig-2" / "orig_ids.npy")
    orig[3] = orig[4]
    np.save(tmp_path / "orig-2" / "orig_ids.npy", orig)
    runs = [("fastsample.train", ["--data", root / "node-2", "--epochs", "1", "--threads", "1", "--quiet",
                                  "--checkpoint-dir", ck, "--hidden", "16", "--fanouts", "4,4", "--eval-every", "0",
                                  "--batch-size", "64"])]
    infer = lambda out, *flags: ("fastsample.infer", ["--data", root / "node-2", "--checkpoint", ck / "epoch-0.pt",
                                                      "--out", tmp_path / out, "--quiet", *flags])
    runs += [infer("probs", "--output", "probabilities", "--format", "parquet"),
             infer("hidden", "--output", "embeddings", "--format", "parquet"),
             infer("bad1", "--output", "predictions"),
             infer("bad2", "--node-types", "author"),
             infer("bad3", "--node-types", "nope", "--output", "embeddings"),
             infer("bad4", "--node-types", "author,paper,author", "--output", "embeddings"),
             *(("fastsample.infer", ["--data", tmp_path / data, "--checkpoint", ck / "epoch-0.pt", "--out",
                                     tmp_path / f"bad{i}", "--quiet", "--output", "embeddings", "--format", "parquet"])
               for i, data in enumerate(("short-2", "twice-2", "noid-2", "orig-2"), 5))]
    train, probs, hidden, *bad = run_commands(2, runs, tmp_path / "runs")
    assert train.returncode == 0 and probs.returncode == 0 and hidden.returncode == 0, probs.stderr + hidden.stderr
    p = pq.read_table(tmp_path / "probs" / "paper")
    rows = np.stack(p.column("probabilities").to_numpy(zero_copy_only=False))
    assert np.allclose(rows.sum(1), 1, atol=1e-5) and p.column("id")[0].as_py().startswith("paper-")
    index = json.loads((tmp_path / "hidden" / "index.json").read_text())
    assert sorted(index["node_types"]) == sorted(load_dataset(root / "h").graph.node_types) and index["width"] == 16
    for proc, message in zip(bad, ("--output predictions does not serve --task node",
                                   "--node-types: logits exist for the target type paper only",
                                   "--node-types: nope: not a node type",
                                   "--node-types: author named twice",
                                   # before inference, though an npy export writes no user ids: its map is wrong
                                   f"{short}: 5 ids, expected one per author node",
                                   f"{twice}: an id repeated: each author node needs its own",
                                   f"{noid}: no readable id column",
                                   f"{tmp_path / 'orig-2' / 'orig_ids.npy'}: not a permutation of the node ids")):
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not any((tmp_path / f"bad{i}").exists() for i in range(1, 9))
