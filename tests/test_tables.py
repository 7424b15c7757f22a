"""python -m fastsample.data tables: a dataset from tables with the user's ids, the same
dataset as the one the tables were written from, its transforms' values, and one line,
exit status 2 and nothing in OUT for every kind of bad input."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.tables import compare, export
from conftest import run_module
from fastsample.comm.local import LocalCommunicator
from fastsample.data.edge_labels import load_edge_labels
from fastsample.data.graph import load_dataset
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from fastsample.trainer import TrainConfig, Trainer
from fastsample.trainer.report import Reporter


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    return root / "h"


def _losses(data) -> list:
    config = TrainConfig(data=str(data), fanouts=(5, 5), batch_size=64, hidden=16, epochs=2, threads=1, quiet=True,
                         matmul="blas", eval_every=0, embed_dim=8)
    return [x for r in Trainer(config, LocalCommunicator(), reporter=Reporter()).run() for x in r.step_losses]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_tables_written_from_a_dataset_build_the_same_dataset_and_train_alike(typed, tmp_path, fmt):
    spec = export(typed, tmp_path / "tables", fmt)
    proc = run_module("fastsample.data", "tables", spec, tmp_path / "built")
    assert proc.returncode == 0, proc.stderr
    assert compare(typed, tmp_path / "built") == []
    meta = json.loads((tmp_path / "built" / "meta.json").read_text())
    assert meta["tables"]["class_names"] == [f"class-{c:04d}" for c in range(meta["num_classes"])]
    ids = pq.read_table(tmp_path / "built" / meta["tables"]["id_maps"]["author"]).column("id").to_pylist()
    assert ids == [f"author-{k}" for k in range(len(ids))]  # row k: the user's id of dense id k
    if fmt == "parquet":
        assert _losses(typed) == _losses(tmp_path / "built")


def _table(path, **columns):
    pq.write_table(pa.table(columns), path)
    return path.name


def _spec(path, nodes, edges, **top):
    path.write_text(json.dumps({"nodes": nodes, "edges": edges, **top}))
    return path


@pytest.fixture
def shop(tmp_path):
    """A small two-type graph with string and integer ids, every transform and labelled edges."""
    _table(tmp_path / "users.parquet", uid=["u1", "u2", "u3", "u4"], age=[20.0, None, 40.0, 50.0],
           country=["fr", "de", "fr", "it"], tags=["a|b", "b", "", "a|a|c"],
           segment=["gold", "basic", None, "gold"], split=["train", "val", None, "test"])
    _table(tmp_path / "items.parquet", iid=[10, 20, 30], price=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    _table(tmp_path / "buys.parquet", user=["u1", "u2", "u3", "u4", "u1"], item=[10, 20, 30, 10, 30],
           fraud=[0, 1, 0, None, 1])
    nodes = [{"node_type": "user", "files": "users.parquet", "node_id_col": "uid",
              "features": [{"feature_col": "age", "fill": 30.0, "transform": {"name": "standardize"}},
                           {"feature_col": "country", "transform": "to_categorical"},
                           {"feature_col": "country", "transform": {"name": "hash", "buckets": 8}},
                           {"feature_col": "tags", "transform": {"name": "bag", "buckets": 4, "separator": "|"}}],
              "labels": [{"label_col": "segment", "split_col": "split"}]},
             {"node_type": "item", "files": "items.parquet", "node_id_col": "iid",
              "features": [{"feature_col": "price"}]}]
    edges = [{"relation": ["user", "buys", "item"], "files": "buys.parquet", "source_id_col": "user",
              "dest_id_col": "item", "reverse": "bought_by",
              "labels": [{"label_col": "fraud", "split_pct": [0.5, 0.25, 0.25], "seed": 1}]}]
    return tmp_path, nodes, edges


def test_features_labels_and_labelled_edges_from_tables(shop):
    root, nodes, edges = shop
    proc = run_module("fastsample.data", "tables", _spec(root / "spec.json", nodes, edges, name="shop"), root / "out")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(root / "out")
    assert ds.graph.node_types == ("user", "item") and ds.target_type == "user" and ds.num_classes == 2
    x = np.asarray(ds.shards["user"])
    age = np.array([20, 30, 40, 50.0])
    assert np.allclose(x[:, 0], (age - age.mean()) / age.std(), atol=1e-6)  # the null filled, then standardised
    assert x[:, 1:4].tolist() == [[0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]  # de, fr, it in sorted order
    hashed = x[:, 4:12]
    assert (hashed.sum(1) == 1).all() and (hashed[0] == hashed[2]).all() and not (hashed[0] == hashed[1]).all()
    assert x[:, 12:16].sum(1).tolist() == [2, 1, 0, 3]  # a bag counts its tokens ("a|a|c": 3)
    assert np.asarray(ds.shards["item"]).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert ds.labels.tolist() == [1, 0, -1, 1]  # basic, gold by name; a null is unlabelled
    assert (ds.train.tolist(), ds.val.tolist(), ds.test.tolist()) == ([0], [1], [3])
    meta = json.loads((root / "out" / "meta.json").read_text())
    assert meta["tables"]["class_names"] == ["basic", "gold"]
    assert ds.graph.edge_types == (("user", "buys", "item"), ("item", "bought_by", "user"))
    labelled = load_edge_labels(root / "out", ds.num_nodes, meta["edge_labels"], graph=ds.graph)
    assert meta["edge_labels"]["reverse"] == ["item", "bought_by", "user"]
    got = {tuple(e): int(y) for s in ("train", "val", "test")
           for e, y in zip(labelled.edges[s].tolist(), labelled.labels[s].tolist())}
    # item ids come after the 4 users: item 10 is node 4; the unlabelled edge (u4, 10) is in no split
    assert got == {(0, 4): 0, (1, 5): 1, (2, 6): 0, (0, 6): 1}
    # the spec may be YAML
    (root / "spec.yaml").write_text(__import__("yaml").safe_dump({"nodes": nodes, "edges": edges}))
    assert run_module("fastsample.data", "tables", root / "spec.yaml", root / "out2").returncode == 0
    assert compare(root / "out", root / "out2") == []


BAD = {
    "duplicate id": (lambda r, n, e: _table(r / "users.parquet", uid=["u1", "u2", "u1", "u4"], age=[1.0] * 4,
                                            country=["fr"] * 4, tags=[""] * 4, segment=["gold"] * 4,
                                            split=["train"] * 4),
                     "users.parquet: column 'uid', row 2: duplicate node id 'u1' (first at row 0"),
    "unknown id": (lambda r, n, e: _table(r / "buys.parquet", user=["u1", "zz", "u3", "u4", "yy"],
                                          item=[10, 20, 30, 10, 99], fraud=[0, 1, 0, 1, 1]),
                   "2 edges name a node id that its node table does not have (buys.parquet row 1: user 'zz'; "
                   "buys.parquet row 4: user 'yy'"),
    "label null in a split": (lambda r, n, e: n[0]["labels"][0].update(label_col="age", task_type="regression"),
                              "users.parquet: row 1, column 'age': null, but column 'split' puts the row in val"),
    "transform type": (lambda r, n, e: n[1]["features"].append({"feature_col": "price",
                                                                "transform": "to_categorical"}),
                       "items.parquet: column 'price': type list<element: double>, but transform to_categorical "
                       "takes strings or lists of strings"),
    "missing file": (lambda r, n, e: e[0].update(files="nope.parquet"), "edges[0].files: "),
    "missing column": (lambda r, n, e: e[0].update(dest_id_col="product"),
                       "buys.parquet: no column 'product' (relation user:buys:item"),
    "null feature": (lambda r, n, e: n[0]["features"][0].pop("fill"),
                     "users.parquet: column 'age', row 1: null, and the feature declares no fill"),
    "unknown key": (lambda r, n, e: n[0].update(node_typ="x"), "nodes[0]: unknown key 'node_typ'"),
    "one class": (lambda r, n, e: _table(r / "users.parquet", uid=["u1", "u2", "u3", "u4"], age=[1.0] * 4,
                                         country=["fr"] * 4, tags=[""] * 4, segment=["gold"] * 4,
                                         split=["train"] * 4),
                  "users.parquet: column 'segment': one class only ('gold'): a classification needs at least two"),
    "truncated edge table": (lambda r, n, e: (r / "buys.parquet").write_bytes((r / "buys.parquet").read_bytes()[:-20]),
                             "buys.parquet: unreadable as parquet ("),
    "id types differ": (lambda r, n, e: _table(r / "items.parquet", iid=["10", "20", "30"],
                                               price=[[1.0, 2.0]] * 3),
                        "buys.parquet: column 'item': ids of type int64, but node type item's table has string ids"),
    "types differ between files": (lambda r, n, e: (_table(r / "more.parquet", iid=["40"], price=[[1.0, 2.0]]),
                                                    n[1].update(files=["items.parquet", "more.parquet"])),
                                   "more.parquet: column 'iid' holds string, but "),
    "not a finite number": (lambda r, n, e: _table(r / "items.parquet", iid=[10, 20, 30],
                                                   price=[[1.0, 2.0], [3.0, float("nan")], [5.0, 6.0]]),
                            "items.parquet: column 'price', row 1: nan, not a finite number"),
    "beyond float16": (lambda r, n, e: (_table(r / "items.parquet", iid=[10, 20, 30], price=[[1.0, 7e4]] * 3),
                                        n[1].update(feature_dtype="float16")),
                       "items.parquet: column 'price', row 0: a feature value beyond float16's range"),
    "empty lists": (lambda r, n, e: _table(r / "items.parquet", iid=[10, 20, 30],
                                           price=pa.array([[], [], []], pa.list_(pa.float64()))),
                    "items.parquet: column 'price': lists of 0 numbers"),
    "no training row": (lambda r, n, e: n[0]["labels"][0].update(split_col=None, split_pct=[0.0, 0.5, 0.5]),
                        "node type user: labels 'segment': no training row (3 labelled rows; split_pct"),
    "no rows": (lambda r, n, e: _table(r / "items.parquet", iid=pa.array([], pa.int64()),
                                       price=pa.array([], pa.list_(pa.float64()))),
                "node type item: its table has no rows ("),
    "sparse class ids": (lambda r, n, e: _table(r / "users.parquet", uid=["u1", "u2", "u3", "u4"], age=[1.0] * 4,
                                                country=["fr"] * 4, tags=[""] * 4, segment=[0, 10**9, 0, 1],
                                                split=["train"] * 4),
                         "users.parquet: column 'segment': class ids up to 1,000,000,000 for 3 distinct classes"),
    "unsigned past int64": (lambda r, n, e: _table(r / "items.parquet", iid=pa.array([2**64 - 1, 20, 30], pa.uint64()),
                                                   price=[[1.0, 2.0]] * 3),
                            "items.parquet: column 'iid', row 0: id 18446744073709551615 is past 2^63-1"),
    # arrow's lookup of a name the header holds twice gave the last column, whichever it was
    "a column twice in a header": (lambda r, n, e: ((r / "buys.csv").write_text("user,item,user\nu1,10,u2\n"),
                                                    e[0].update(files="buys.csv", labels=[])),
                                   "buys.csv: column 'user' appears 2 times in its header (relation user:buys:item)"),
    # read as the first file's format, the other was "unreadable as parquet"
    "csv and parquet in one table": (lambda r, n, e: ((r / "more.csv").write_text("user,item,fraud\nu2,10,0\n"),
                                                      e[0].update(files=["buys.parquet", "more.csv"])),
                                     "more.csv is csv, the table's other files parquet: one format per table"),
    # squares past float64: every value came out 0
    "too large to standardize": (lambda r, n, e: _table(r / "users.parquet", uid=["u1", "u2", "u3", "u4"],
                                                        age=[1e200, 2e200, 3e200, 4e200], country=["fr"] * 4,
                                                        tags=[""] * 4, segment=["gold"] * 4, split=["train"] * 4),
                                 "column 'age': values too large to standardize"),
    "ids not text": (lambda r, n, e: _table(r / "users.parquet", uid=pa.array([b"\xff", b"u2", b"u3", b"u4"]),
                                            age=[1.0] * 4, country=["fr"] * 4, tags=[""] * 4, segment=["gold"] * 4,
                                            split=["train"] * 4),
                     "users.parquet: column 'uid': ids of type binary that are not text"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_file_column_and_row_and_leaves_nothing(shop, case):
    root, nodes, edges = shop
    change, message = BAD[case]
    change(root, nodes, edges)
    proc = run_module("fastsample.data", "tables", _spec(root / "spec.json", nodes, edges), root / "out")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert lines[0].startswith("python -m fastsample.data tables: error: ")
    assert not (root / "out").exists() and [p.name for p in root.iterdir() if p.name.startswith("out")] == []


def test_overwrite_never_deletes_the_inputs_or_the_working_directory(shop, monkeypatch):
    from fastsample.atomic import WouldDelete
    from fastsample.data.tables import build_tables

    root, nodes, edges = shop
    spec = _spec(root / "spec.json", nodes, edges)
    held = sorted(p.name for p in root.iterdir())
    # OUT the folder of the spec and its tables: refused, before a byte is written
    proc = run_module("fastsample.data", "tables", spec, root, "--overwrite")
    assert proc.returncode == 2 and proc.stderr == (f"python -m fastsample.data tables: error: {root}: holds the "
                                                    f"input {spec}; replacing it would delete that: write to "
                                                    "another directory\n"), proc.stderr
    assert sorted(p.name for p in root.iterdir()) == held
    # OUT "." (or ""): the working directory, wherever the inputs are
    monkeypatch.chdir(root / "..")
    with pytest.raises(WouldDelete, match="is the working directory"):
        build_tables(spec, "", overwrite=True, progress=False)
    assert sorted(p.name for p in root.iterdir()) == held


def test_csv_ids_as_written_empty_cells_unlabelled_and_files_of_one_table_alike(tmp_path):
    # a CSV's ids are text as written ("007" is not "7"); an empty label cell is unlabelled, a
    # file whose label column is all empty (of no type) joins the others; int32 and int64 id
    # files join; standardize keeps a spread small beside the values (timestamps)
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "a.csv").write_text("uid,t,seg\n007,1000000000001,gold\n7,1000000000002,\n"
                                              "0,1000000000003,basic\n")
    (tmp_path / "users" / "b.csv").write_text("uid,t,seg\n12,1000000000004,\n")
    _table(tmp_path / "i1.parquet", iid=pa.array([1, 2], pa.int32()), w=[1.0, 2.0])
    _table(tmp_path / "i2.parquet", iid=pa.array([3], pa.int64()), w=[3.0])
    (tmp_path / "buys.csv").write_text("u,i\n007,1\n7,2\n0,3\n12,1\n")
    nodes = [{"node_type": "user", "files": "users", "node_id_col": "uid",
              "features": [{"feature_col": "t", "transform": "standardize"}],
              "labels": [{"label_col": "seg", "split_pct": [1.0, 0.0, 0.0]}]},
             {"node_type": "item", "files": ["i1.parquet", "i2.parquet"], "node_id_col": "iid",
              "features": [{"feature_col": "w"}]}]
    edges = [{"relation": ["user", "buys", "item"], "files": "buys.csv", "source_id_col": "u", "dest_id_col": "i",
              "reverse": "bought_by"}]
    proc = run_module("fastsample.data", "tables", _spec(tmp_path / "spec.json", nodes, edges), tmp_path / "out")
    assert proc.returncode == 2 and "buys.csv: column 'i': ids of type string, but node type item's table has " \
        "int64 ids (a CSV file's ids are read as text, as written)" in proc.stderr, proc.stderr
    _table(tmp_path / "buys.parquet", u=["007", "7", "0", "12"], i=[1, 2, 3, 1])
    edges[0]["files"] = "buys.parquet"
    proc = run_module("fastsample.data", "tables", _spec(tmp_path / "spec.json", nodes, edges), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    ds, meta = load_dataset(tmp_path / "out"), json.loads((tmp_path / "out" / "meta.json").read_text())
    assert pq.read_table(tmp_path / "out" / "id_maps" / "user.parquet").column("id").to_pylist() == \
        ["007", "7", "0", "12"]
    assert ds.labels.tolist() == [1, -1, 0, -1] and meta["tables"]["class_names"] == ["basic", "gold"]
    assert ds.graph.num_edges == 8  # every edge found, and its reverse
    t = np.asarray(ds.shards["user"])[:, 0]
    assert np.allclose(t, (np.arange(4) - 1.5) / np.arange(4).std(), atol=1e-5), t


def test_csv_names_are_read_as_written_and_empty_cells_are_null(tmp_path):
    # CSV columns of names were type-guessed: codes 01 and 1 one category, class names 01 and 1
    # one class; an empty id cell made a node of id "", an empty category a category ""
    (tmp_path / "u.csv").write_text("uid,code,seg\na,01,01\nb,1,1\nc,,002\nd,001,\ne,10,2\n")
    (tmp_path / "e.csv").write_text("s,d,y\na,b,\na,b,\nb,c,1\nc,c,\nd,e,0\n")
    (tmp_path / "parts" / "date=1").mkdir(parents=True)  # a Spark output's layout: its files in subfolders
    (tmp_path / "parts" / "date=1" / "part-0.csv").write_text("s,d,w\ne,a,1\n")
    (tmp_path / "parts" / "_SUCCESS").write_text("")
    nodes = [{"node_type": "u", "files": "u.csv", "node_id_col": "uid",
              "features": [{"feature_col": "code", "transform": "to_categorical", "fill": "none"}],
              "labels": [{"label_col": "seg", "split_pct": [0.5, 0.5, 0.0]}]}]
    # unlabelled rows (y empty) may repeat an edge or be a self-loop: only labelled edges must be unique
    edges = [{"relation": ["u", "to", "u"], "files": "e.csv", "source_id_col": "s", "dest_id_col": "d",
              "labels": [{"label_col": "y", "split_pct": [1.0, 0.0, 0.0]}]},
             {"relation": ["u", "likes", "u"], "files": "parts", "source_id_col": "s", "dest_id_col": "d"}]
    proc = run_module("fastsample.data", "tables", _spec(tmp_path / "spec.json", nodes, edges), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    ds, meta = load_dataset(tmp_path / "out"), json.loads((tmp_path / "out" / "meta.json").read_text())
    # categories 001, 01, 1, 10, none (the empty cell, filled): five, in sorted order
    x = np.asarray(ds.shards["u"])
    assert x.argmax(1).tolist() == [1, 2, 4, 0, 3] and x.shape[1] == 5
    assert meta["tables"]["class_names"] == ["002", "01", "1", "2"] and ds.labels.tolist() == [1, 2, 0, -1, 3]
    # 4 labelled rows at [0.5, 0.5, 0]: 2 and 2, none left out
    assert (len(ds.train), len(ds.val), len(ds.test)) == (2, 2, 0)
    assert ds.graph.num_edges == 4  # a->b once, b->c, d->e (the self-loop dropped), and e->a from the subfolder
    labelled = load_edge_labels(tmp_path / "out", ds.num_nodes, meta["edge_labels"], graph=ds.graph)
    assert sorted(map(tuple, labelled.edges["train"].tolist())) == [(1, 2), (3, 4)]
    # class ids written as integers stay class ids
    (tmp_path / "u.csv").write_text("uid,code,seg\na,01,0\nb,1,1\nc,,10\nd,001,\ne,10,2\n")
    proc = run_module("fastsample.data", "tables", _spec(tmp_path / "spec.json", nodes, edges), tmp_path / "ints")
    assert proc.returncode == 0, proc.stderr
    assert load_dataset(tmp_path / "ints").labels.tolist() == [0, 1, 10, -1, 2]
    # an empty id cell is a null id
    (tmp_path / "u.csv").write_text("uid,code,seg\na,01,0\n,1,1\n")
    proc = run_module("fastsample.data", "tables", _spec(tmp_path / "spec.json", nodes, edges), tmp_path / "null")
    assert proc.returncode == 2 and "u.csv: column 'uid', row 1: a null node id" in proc.stderr, proc.stderr


def test_a_type_no_relation_leads_into_is_refused_where_read_and_left_out_of_embeddings(shop):
    # without the reverse relation no message reaches a user: a node task on users is refused
    # (before: a traceback at the first backward), and inference of every type's embeddings
    # leaves users out (before: rows of zeros), refusing them when named
    root, nodes, edges = shop
    edges[0].pop("reverse")
    edges[0].pop("labels")
    assert run_module("fastsample.data", "tables", _spec(root / "spec.json", nodes, edges), root / "u").returncode == 0
    train = ("fastsample.train", "--fanouts", "2,2", "--hidden", "8", "--batch-size", "2", "--epochs", "1",
             "--threads", "1", "--eval-every", "0", "--quiet")
    proc = run_module(*train, "--data", root / "u")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "node type user is no relation's destination, so the model's rows for it get no messages (--task node "
        "reads them): give the graph a relation into it (a reverse relation: the tables spec's reverse)"), proc.stderr
    # labels on the items, which the purchases reach: trains; users have no embeddings to write
    _table(root / "items.parquet", iid=[10, 20, 30], price=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], kind=["a", "b", "a"])
    nodes[1]["labels"] = [{"label_col": "kind", "split_pct": [1.0, 0.0, 0.0]}]
    del nodes[0]["labels"]
    assert run_module("fastsample.data", "tables", _spec(root / "spec.json", nodes, edges), root / "i").returncode == 0
    assert run_module(*train, "--data", root / "i", "--checkpoint-dir", root / "ck").returncode == 0
    infer = ("fastsample.infer", "--data", root / "i", "--checkpoint", root / "ck" / "epoch-0.pt", "--output",
             "embeddings", "--quiet")
    proc = run_module(*infer, "--out", root / "emb")
    assert proc.returncode == 0 and "left out user: no relation leads into it" in proc.stdout, proc.stderr
    assert list(json.loads((root / "emb" / "index.json").read_text())["node_types"]) == ["item"]
    proc = run_module(*infer, "--out", root / "emb2", "--node-types", "user")
    assert proc.returncode == 2 and "--node-types: user is no relation's destination" in proc.stderr, proc.stderr


def test_an_undirected_relation_labels_an_edge_once_either_way_round(tmp_path):
    # (u, v) and (v, u) of an undirected relation are one edge: two labels for it (which could
    # differ, or fall in two splits) are refused; each edge once builds
    _table(tmp_path / "users.parquet", uid=["a", "b", "c"], x=[1.0, 2.0, 3.0])
    nodes = [{"node_type": "user", "files": "users.parquet", "node_id_col": "uid", "features": [{"feature_col": "x"}]}]
    edges = [{"relation": ["user", "knows", "user"], "files": "knows.parquet", "source_id_col": "s",
              "dest_id_col": "d", "undirected": True, "labels": [{"label_col": "y", "split_pct": [1.0, 0.0, 0.0]}]}]
    spec = _spec(tmp_path / "spec.json", nodes, edges)
    _table(tmp_path / "knows.parquet", s=["a", "b", "c"], d=["b", "a", "a"], y=["ok", "fraud", "ok"])
    proc = run_module("fastsample.data", "tables", spec, tmp_path / "out")
    assert proc.returncode == 2 and "knows.parquet: row 1: the edge is labelled twice (first at " in proc.stderr \
        and "row 0; undirected: either way round)" in proc.stderr, proc.stderr
    _table(tmp_path / "knows.parquet", s=["a", "c"], d=["b", "a"], y=["ok", "fraud"])
    assert run_module("fastsample.data", "tables", spec, tmp_path / "out").returncode == 0


def test_unknown_ids_can_be_dropped_and_are_counted(shop):
    root, nodes, edges = shop
    BAD["unknown id"][0](root, nodes, edges)
    proc = run_module("fastsample.data", "tables", _spec(root / "spec.json", nodes, edges), root / "out",
                      "--on-unknown", "drop")
    assert proc.returncode == 0 and "dropped 2 edges naming unknown node ids" in proc.stderr, proc.stderr
    assert load_dataset(root / "out").graph.num_edges == 3 * 2  # three known edges, and their reverses


def test_a_bag_of_a_list_column_fills_a_null_list(tmp_path):
    # a list column's null could not be filled: the spec took only a number or a string as fill
    from fastsample.data.tables import build_tables

    tags = pa.array([["x", "y"], None, ["x"]], pa.list_(pa.string()))
    pq.write_table(pa.table({"uid": ["a", "b", "c"], "tags": tags}), tmp_path / "u.parquet")
    pq.write_table(pa.table({"s": ["a", "b"], "d": ["b", "c"]}), tmp_path / "e.parquet")
    edges = [{"relation": ["u", "to", "u"], "files": "e.parquet", "source_id_col": "s", "dest_id_col": "d"}]
    widths = {}
    for fill in ([], ["x", "x"]):
        nodes = [{"node_type": "u", "files": "u.parquet", "node_id_col": "uid",
                  "features": [{"feature_col": "tags", "fill": fill, "transform": {"name": "bag", "buckets": 8}}]}]
        out = tmp_path / f"out{len(fill)}"
        build_tables(_spec(tmp_path / "spec.json", nodes, edges), out, progress=False)
        x = np.asarray(load_dataset(out).features)  # one node type: an untyped dataset
        widths[len(fill)] = x.sum(1).tolist()  # tokens counted per row
    assert widths == {0: [2.0, 0.0, 1.0], 2: [2.0, 2.0, 1.0]}
    nodes[0]["features"][0]["fill"] = {"a": 1}
    with pytest.raises(Exception, match="fill: expected a number, a string, or a list of them"):
        build_tables(_spec(tmp_path / "spec.json", nodes, edges), tmp_path / "bad", progress=False)


def test_a_later_snapshot_is_transformed_as_the_training_data_was(tmp_path):
    # infer --other-data on a snapshot built on its own refitted standardize and to_categorical
    # on the new tables: the old nodes' numbers meant other things, and 2,890 of 4,000 old
    # predictions flipped, silently. --transforms-from applies the training dataset's fits
    from fastsample.data.tables import build_tables

    rng = np.random.default_rng(0)
    ages = rng.normal(40, 10, 400)

    def snapshot(folder, n, shift):
        folder.mkdir()
        ids = [f"u{i:05d}" for i in range(n)]
        age = ages[:n] + np.where(np.arange(n) >= 300, shift, 0)
        kind = [["b", "a", "c"][i % 3] if i < 300 else "z" for i in range(n)]
        level = [[2, 10, 100][i % 3] for i in range(n)]
        _table(folder / "u.parquet", uid=ids, age=age, kind=kind, level=level,
               seg=[["no", "yes"][i % 2] for i in range(n)])
        src, dst = rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n)
        _table(folder / "e.parquet", s=[ids[i] for i in src], d=[ids[i] for i in dst])
        nodes = [{"node_type": "u", "files": "u.parquet", "node_id_col": "uid",
                  "features": [{"feature_col": "age", "transform": "standardize"},
                               {"feature_col": "kind", "transform": "to_categorical"},
                               {"feature_col": "level", "transform": "to_categorical"}],
                  "labels": [{"label_col": "seg", "split_pct": [0.6, 0.2, 0.2]}]}]
        edges = [{"relation": ["u", "to", "u"], "files": "e.parquet", "source_id_col": "s", "dest_id_col": "d"}]
        return _spec(folder / "spec.json", nodes, edges)

    first = build_tables(snapshot(tmp_path / "t1", 300, 0), tmp_path / "d1", progress=False)
    fits = first["tables"]["transforms"]["u"]
    assert fits[1]["vocabulary"] == ["a", "b", "c"] and fits[2]["vocabulary"] == ["2", "10", "100"]  # as numbers
    later = snapshot(tmp_path / "t2", 400, 50.0)  # 100 new nodes, far off the old mean, of a new kind
    build_tables(later, tmp_path / "refit", progress=False)
    build_tables(later, tmp_path / "d2", progress=False, transforms_from=tmp_path / "d1")
    x1, x2 = (np.asarray(load_dataset(tmp_path / d).features) for d in ("d1", "d2"))
    assert np.array_equal(x2[:300], x1)  # the old nodes' rows as the model saw them
    assert not x2[300:, 1:4].any()  # kind "z": in no category of the training vocabulary
    run = lambda *a: run_module(*a, "--quiet")
    assert run("fastsample.train", "--data", tmp_path / "d1", "--epochs", "1", "--fanouts", "3,3", "--hidden", "8",
               "--batch-size", "32", "--threads", "1", "--checkpoint-dir", tmp_path / "ck").returncode == 0
    infer = lambda data, out: run("fastsample.infer", "--data", tmp_path / data, "--checkpoint",
                                  tmp_path / "ck" / "epoch-0.pt", "--out", tmp_path / out, "--other-data")
    refused = infer("refit", "o1")
    assert refused.returncode == 2 and "features were fitted on its own tables" in refused.stderr, refused.stderr
    assert "--transforms-from" in refused.stderr
    proc = infer("d2", "o2")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "o2" / "index.json").read_text())["class_names"] == ["no", "yes"]


def test_a_csv_cell_that_is_no_number_is_named_by_its_row(tmp_path):
    # one text cell makes arrow read the whole column as text: the error named its type, not the row
    from fastsample.data.table_spec import TableError
    from fastsample.data.tables import build_tables

    (tmp_path / "u.csv").write_text("uid,f1,y\na,1.5,0.2\nb,2,0.4\nc,oops,0.1\nd,3,abc\n")
    (tmp_path / "e.csv").write_text("s,d\na,b\nb,c\nc,d\n")
    edges = [{"relation": ["u", "to", "u"], "files": "e.csv", "source_id_col": "s", "dest_id_col": "d"}]
    nodes = [{"node_type": "u", "files": "u.csv", "node_id_col": "uid",
              "features": [{"feature_col": "f1", "transform": "standardize"}]}]
    with pytest.raises(TableError, match=r"u\.csv: column 'f1', row 2: 'oops' is not a number"):
        build_tables(_spec(tmp_path / "spec.json", nodes, edges), tmp_path / "o1", progress=False)
    (tmp_path / "u.csv").write_text("uid,f1,y\na,1.5,0.2\nb,2,0.4\nc,4,0.1\nd,3,abc\n")
    nodes[0]["labels"] = [{"label_col": "y", "task_type": "regression", "split_pct": [0.5, 0.25, 0.25]}]
    with pytest.raises(TableError, match=r"u\.csv: row 3, column 'y': 'abc' is not a number"):
        build_tables(_spec(tmp_path / "spec.json", nodes, edges), tmp_path / "o2", progress=False)
