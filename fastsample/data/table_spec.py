"""The tables spec: which tables make a dataset (python -m fastsample.data tables SPEC OUT).

A JSON (or YAML) file; its keys follow GraphStorm's graph-construction spec where the idea
is the same, so a gconstruct spec needs few changes. Paths are relative to the spec's folder.

    {"name": "shop",                                  optional (default: OUT's name)
     "nodes": [
       {"node_type": "user",
        "files": "users.parquet",                     a file, a list of files, or a folder
                                                      (its *.parquet, or *.csv, in name order)
        "format": {"name": "parquet"},                parquet or csv (default: by extension);
                                                      csv takes "separator" (default ",")
        "node_id_col": "user_id",                     string or integer ids, unique
        "feature_dtype": "float32",                   or "float16": the stored features
        "features": [                                 concatenated in this order
          {"feature_col": "age", "fill": 0.0,         fill: the value of a null (else refused; a list
                                                      column's: a list, [] for none)
           "transform": {"name": "standardize"}},     see TRANSFORMS below
          {"feature_col": "embedding"},               a list column: its values, as they are
          {"feature_col": "country", "transform": {"name": "to_categorical"}},
          {"feature_col": "tags", "transform": {"name": "bag", "buckets": 64, "separator": "|"}}],
        "labels": [{"label_col": "segment",          class names or integers (null: unlabelled),
                    "task_type": "classification",    or "regression": floats (null: unlabelled)
                    "split_pct": [0.8, 0.1, 0.1],     seeded random fractions of the labelled rows,
                    "seed": 0}]}                      or "split_col": a column of train/val/test/null
       ],
     "edges": [
       {"relation": ["user", "buys", "item"],
        "files": "buys/", "source_id_col": "user", "dest_id_col": "item",
        "reverse": "bought_by",                      also store each edge backwards, as a relation
                                                      of its own (typed graphs)
        "undirected": true,                           one node type and one relation: store both
                                                      directions (an undirected graph)
        "labels": [{"label_col": "fraud", "task_type": "classification", "split_pct": [0.8, 0.1, 0.1]}]}
       ]}

TRANSFORMS (a feature's "transform"; default "none"):
    none            numbers (a numeric column, or a list / fixed-size list of numbers: one
                    feature per element) as float, bit for bit where they are float32
    standardize     numbers, each feature minus its mean over the table, over its standard
                    deviation (a constant feature becomes 0)
    to_categorical  one-hot of the column's distinct values (strings or integers), in their
                    sorted order; with "separator" a string holds several: multi-hot
    hash            a category hashed into "buckets" (default 64) one-hot columns: no
                    vocabulary kept, unseen values welcome
    bag             tokens (a list-of-strings column, or a string split at "separator",
                    default " ") hashed into "buckets" (default 64) columns of counts

One node type and one relation from it to itself make an untyped dataset (GraphSAGE); any
other shape a typed one (the R-GCN), its target type the node type with labels. Every node
type needs a node table (its ids, possibly nothing else). Labelled edges belong to one
relation, whose endpoints' tables must exist like any other's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from fastsample.data.graph import DatasetError

__all__ = ["TableError", "Source", "Feature", "Label", "NodeTable", "EdgeTable", "Spec", "read_spec", "TRANSFORMS"]

TRANSFORMS = ("none", "standardize", "to_categorical", "hash", "bag")
FORMATS = ("parquet", "csv")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # node types name files (id_maps/TYPE.parquet, features/TYPE.npy)


class TableError(DatasetError):
    """Bad input to the tables builder: the spec, a table file, a column or a row; the
    message names the file, the column and the row where there is one."""


@dataclass(frozen=True)
class Source:
    """Where a table's rows are: its files, in order, and their format."""

    files: tuple[Path, ...]
    format: str
    separator: str = ","


@dataclass(frozen=True)
class Feature:
    column: str
    transform: str = "none"
    options: dict = field(default_factory=dict)  # the transform's own keys (buckets, separator)
    fill: object = None  # a null's value; None: nulls are refused


@dataclass(frozen=True)
class Label:
    column: str
    task: str  # "classification" or "regression"
    split_pct: tuple[float, float, float] | None = None
    split_col: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class NodeTable:
    type: str
    source: Source
    id_col: str
    features: tuple[Feature, ...] = ()
    label: Label | None = None
    feature_dtype: str = "float32"


@dataclass(frozen=True)
class EdgeTable:
    relation: tuple[str, str, str]
    source: Source
    src_col: str
    dst_col: str
    label: Label | None = None
    reverse: str | None = None
    undirected: bool = False


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str | None
    nodes: tuple[NodeTable, ...]
    edges: tuple[EdgeTable, ...]

    @property
    def untyped(self) -> bool:
        """One node type and one relation from it to itself: an untyped dataset."""
        return len(self.nodes) == 1 and len(self.edges) == 1 and self.edges[0].relation[0] == \
            self.edges[0].relation[2] == self.nodes[0].type and self.edges[0].reverse is None


def read_spec(path) -> Spec:
    """Read and check the spec at ``path`` (JSON, or YAML by its extension); TableError
    naming the file and the key otherwise. Files are checked to exist; columns are
    checked when the tables are opened."""
    path = Path(path)
    if not path.is_file():
        raise TableError(f"{path}: no such spec file")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            raw = yaml.safe_load(text)
        else:
            raw = json.loads(text)
    except Exception as e:  # json's and yaml's errors both say where
        raise TableError(f"{path}: not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'} ({e})") from None
    where = _Where(path)
    if not isinstance(raw, dict):
        raise TableError(f"{path}: expected an object with nodes and edges")
    where.keys(raw, "", {"nodes", "edges", "name", "version"})
    nodes = tuple(_node(where, n, f"nodes[{i}]") for i, n in enumerate(where.list(raw, "nodes", "")))
    edges = tuple(_edge(where, e, f"edges[{i}]") for i, e in enumerate(where.list(raw, "edges", "")))
    types = [n.type for n in nodes]
    if len(set(types)) != len(types):
        raise TableError(f"{path}: nodes: node type {next(t for t in types if types.count(t) > 1)!r} is listed twice")
    if not nodes or not edges:
        raise TableError(f"{path}: needs at least one node table and one edge table")
    relations = set()
    for i, e in enumerate(edges):
        for end, t in (("source", e.relation[0]), ("destination", e.relation[2])):
            if t not in types:
                raise TableError(f"{path}: edges[{i}].relation: its {end} type {t!r} has no node table (node types: "
                                 f"{', '.join(types)})")
        for rel in [e.relation] + ([(e.relation[2], e.reverse, e.relation[0])] if e.reverse else []):
            if rel in relations:
                raise TableError(f"{path}: edges[{i}]: relation {':'.join(rel)} is listed twice")
            relations.add(rel)
        if e.undirected and (e.relation[0] != e.relation[2] or len(nodes) != 1 or len(edges) != 1):
            raise TableError(f"{path}: edges[{i}].undirected: serves one node type and one relation from it to "
                             "itself (an untyped graph); on a typed graph name a reverse relation (\"reverse\")")
    labelled = [n.type for n in nodes if n.label]
    if len(labelled) > 1:
        raise TableError(f"{path}: labels on node types {', '.join(labelled)}: one node type may have labels")
    if sum(e.label is not None for e in edges) > 1:
        raise TableError(f"{path}: labels on several edge types: one relation may have labelled edges")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise TableError(f"{path}: name: expected a string")
    return Spec(path, name, nodes, edges)


class _Where:
    """Key checks that name the spec file and the key."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, rule: str):
        raise TableError(f"{self.path}: {key}: {rule}")

    def keys(self, obj: dict, key: str, allowed: set) -> None:
        unknown = sorted(set(obj) - allowed)
        if unknown:
            self.fail(key or "top level", f"unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})")

    def list(self, obj: dict, name: str, key: str) -> list:
        value = obj.get(name, [])
        if not isinstance(value, list):
            self.fail(f"{key}{'.' if key else ''}{name}", "expected a list")
        return value

    def str(self, obj: dict, name: str, key: str, required: bool = True, default=None):
        value = obj.get(name, default)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            self.fail(f"{key}.{name}", "expected a non-empty string" + ("" if name in obj else " (missing)"))
        return value


def _source(where: _Where, obj: dict, key: str) -> Source:
    files = obj.get("files")
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        where.fail(f"{key}.files", "expected a file, a list of files or a folder")
    fmt = obj.get("format", {})
    fmt = {"name": fmt} if isinstance(fmt, str) else fmt
    if not isinstance(fmt, dict):
        where.fail(f"{key}.format", "expected {\"name\": \"parquet\" or \"csv\"}")
    out = []
    for f in files:
        p = Path(f) if Path(f).is_absolute() else where.path.parent / f
        if p.is_dir():  # and its subfolders (Spark's part files under date=.../), not hidden or _ ones (_SUCCESS)
            found = sorted(q for q in p.rglob("*") if _kind(q) and q.is_file()
                           and not any(c.startswith((".", "_")) for c in q.relative_to(p).parts))
            if not found:
                where.fail(f"{key}.files", f"{p}: a folder without .parquet or .csv files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            where.fail(f"{key}.files", f"{p}: no such file or folder")
    name = fmt.get("name") or _kind(out[0]) or "parquet"
    if name not in FORMATS:
        where.fail(f"{key}.format.name", f"{name!r}, expected parquet or csv")
    other = next((q for q in out if _kind(q) not in (None, name)), None)
    if other is not None:  # read as the first one's format, it was "unreadable as parquet"
        where.fail(f"{key}.files", f"{other} is {_kind(other)}, the table's other files {name}: one format per "
                                   "table (convert the odd ones, or give them a table of their own)")
    separator = fmt.get("separator", ",")
    if not isinstance(separator, str) or len(separator) != 1:
        where.fail(f"{key}.format.separator", "expected one character")
    return Source(tuple(out), name, separator)


def _kind(path: Path) -> str | None:
    """A file's format by its name: csv (.csv, .csv.gz, ...), parquet (.parquet, .pq), or None."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes[-1:] in ([".parquet"], [".pq"]):
        return "parquet"
    return "csv" if ".csv" in suffixes[-2:] else None


def _feature(where: _Where, obj, key: str) -> Feature:
    if not isinstance(obj, dict):
        where.fail(key, "expected an object with feature_col")
    where.keys(obj, key, {"feature_col", "feature_name", "transform", "fill"})
    column = obj.get("feature_col")
    if isinstance(column, list) and len(column) == 1:
        column = column[0]
    if not isinstance(column, str):
        where.fail(f"{key}.feature_col", "expected a column name")
    transform = obj.get("transform", {"name": "none"})
    transform = {"name": transform} if isinstance(transform, str) else transform
    if not isinstance(transform, dict) or transform.get("name") not in TRANSFORMS:
        where.fail(f"{key}.transform", f"{transform!r}: expected {{\"name\": one of {', '.join(TRANSFORMS)}}}")
    options = {k: v for k, v in transform.items() if k != "name"}
    allowed = {"hash": {"buckets"}, "bag": {"buckets", "separator"}, "to_categorical": {"separator"}}.get(
        transform["name"], set())
    where.keys(options, f"{key}.transform", allowed)
    if "buckets" in options and (not isinstance(options["buckets"], int) or not 1 <= options["buckets"] <= 1 << 20):
        where.fail(f"{key}.transform.buckets", "expected an integer in 1..1048576")
    if "separator" in options and (not isinstance(options["separator"], str) or not options["separator"]):
        where.fail(f"{key}.transform.separator", "expected a non-empty string")
    fill = obj.get("fill")
    if fill is not None and not isinstance(fill, (int, float, str)) and not (
            isinstance(fill, list) and all(isinstance(v, (int, float, str)) for v in fill)):
        where.fail(f"{key}.fill", "expected a number, a string, or a list of them (a list column's null: [] for none)")
    return Feature(column, transform["name"], options, fill)


def _label(where: _Where, obj, key: str) -> Label | None:
    labels = obj if isinstance(obj, list) else [obj]
    if not labels:
        return None
    if len(labels) > 1:
        where.fail(key, "one label per table")
    obj, key = labels[0], f"{key}[0]"
    if not isinstance(obj, dict):
        where.fail(key, "expected an object with label_col and task_type")
    where.keys(obj, key, {"label_col", "task_type", "split_pct", "split_col", "seed"})
    column = where.str(obj, "label_col", key)
    task = obj.get("task_type", "classification")
    if task not in ("classification", "regression"):
        where.fail(f"{key}.task_type", f"{task!r}, expected classification or regression")
    pct, col = obj.get("split_pct"), obj.get("split_col")
    if (pct is None) == (col is None):
        where.fail(key, "give the splits as split_pct [train, val, test] or split_col (a column of train/val/test)")
    if pct is not None and (not isinstance(pct, list) or len(pct) != 3 or not all(isinstance(v, (int, float)) and
                                                                                  v >= 0 for v in pct)
                            or not 0 < sum(pct) <= 1 + 1e-9):
        where.fail(f"{key}.split_pct", f"{pct!r}: expected three non-negative fractions summing to at most 1")
    if col is not None and not isinstance(col, str):
        where.fail(f"{key}.split_col", "expected a column name")
    seed = obj.get("seed", 0)
    if not isinstance(seed, int) or seed < 0:
        where.fail(f"{key}.seed", "expected a non-negative integer")
    return Label(column, task, None if pct is None else tuple(float(v) for v in pct), col, seed)


def _node(where: _Where, obj, key: str) -> NodeTable:
    if not isinstance(obj, dict):
        where.fail(key, "expected an object")
    where.keys(obj, key, {"node_type", "files", "format", "node_id_col", "features", "labels", "feature_dtype"})
    node_type = where.str(obj, "node_type", key)
    if not _NAME.match(node_type):
        where.fail(f"{key}.node_type", f"{node_type!r}: letters, digits, '_', '.' and '-' only (it names files)")
    dtype = obj.get("feature_dtype", "float32")
    if dtype not in ("float32", "float16"):
        where.fail(f"{key}.feature_dtype", f"{dtype!r}, expected float32 or float16")
    features = tuple(_feature(where, f, f"{key}.features[{i}]")
                     for i, f in enumerate(where.list(obj, "features", key)))
    return NodeTable(node_type, _source(where, obj, key), where.str(obj, "node_id_col", key), features,
                     _label(where, obj.get("labels", []), f"{key}.labels"), dtype)


def _edge(where: _Where, obj, key: str) -> EdgeTable:
    if not isinstance(obj, dict):
        where.fail(key, "expected an object")
    where.keys(obj, key, {"relation", "files", "format", "source_id_col", "dest_id_col", "labels", "reverse",
                          "undirected", "features"})
    if obj.get("features"):
        where.fail(f"{key}.features", "edge features are not supported (the models read node features only)")
    relation = obj.get("relation")
    if not isinstance(relation, list) or len(relation) != 3 or not all(isinstance(x, str) and x for x in relation):
        where.fail(f"{key}.relation", "expected [source type, relation, destination type]")
    reverse = where.str(obj, "reverse", key, required=False)
    undirected = obj.get("undirected", False)
    if not isinstance(undirected, bool):
        where.fail(f"{key}.undirected", "expected true or false")
    return EdgeTable(tuple(relation), _source(where, obj, key), where.str(obj, "source_id_col", key),
                     where.str(obj, "dest_id_col", key), _label(where, obj.get("labels", []), f"{key}.labels"),
                     reverse, undirected)
