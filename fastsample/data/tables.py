"""python -m fastsample.data tables SPEC OUT: a dataset directory from node and edge tables.

The spec (fastsample/data/table_spec.py: its format, every key and transform) names
Parquet or CSV tables; they are read record batch by record batch (pyarrow), so memory is
O(nodes) (the ids, labels and splits) plus a batch, and the edges go to the in-edge CSC in
bounded memory (fastsample/data/edges.py's edges_to_csc_file). The passes:

  1. each node table: its ids (dense ids 0..n-1 in table order, type by type in the spec's
     order: a node's global id is its type's offset plus its row), its labels and splits,
     and what its transforms must see first (statistics, vocabularies);
  2. each node table again: its feature rows, transformed, into features/TYPE.npy;
  3. each edge table: its ids looked up (an unknown id is counted and refused, or dropped
     with --on-unknown drop), its edges (and their reverse relation's) into the CSC, and a
     labelled relation's edges, labels and splits into edge_labels/.

OUT is an ordinary dataset directory (fastsample/data/graph.py) plus ``id_maps/TYPE.parquet``
(column "id": row k holds the user's id of the type's dense id k) and meta.json's ``tables``
(the id map files, class names where labels were names). Nothing downstream knows the
dataset came from tables; every output that names nodes can be keyed back through the maps.
Any error (a duplicate id, an unknown one, a null where none may be, a column a transform
cannot take, a missing file or column) is one TableError naming the file, the column and
the row, and leaves nothing in OUT.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
from fastsample.progress import progress_bar

from fastsample.data.edge_labels import FOLDER as EDGE_LABELS
from fastsample.data.edges import edges_to_csc_file, typed_range_count
from fastsample.data.graph import (EDGE, NODE, SPLITS, DatasetWriter, feature_file, id_dtype, offset_dtype, type_dtype,
                                   validate_node_data)
from fastsample.data.table_io import IdMap, batches, first_not_number, one_type, parquet_rows
from fastsample.data.table_spec import Label, NodeTable, Spec, TableError, read_spec
from fastsample.data.transforms import transform_for

__all__ = ["build_tables", "ON_UNKNOWN", "TableError"]

ON_UNKNOWN = ("error", "drop")
CSC_BUDGET = 512 << 20  # bytes a destination range of the CSC build may hold (edges_to_csc_file's budget)
_SHOWN = 5  # unknown ids shown in the message


def build_tables(spec, out, *, on_unknown: str = "error", overwrite: bool = False, progress: bool = True,
                 transforms_from=None) -> dict:
    """Build the dataset directory ``out`` from the tables ``spec`` (a path, or a read Spec).
    Returns its meta.json; a TableError (a DatasetError) names what is wrong, and nothing is
    left in ``out``. ``transforms_from``: a dataset built from tables earlier (the one a model
    trained on), whose fitted transforms (standardize's statistics, to_categorical's
    vocabulary: its meta.json's tables.transforms) this build applies instead of fitting its
    own: a later snapshot's features as the model saw its training data's."""
    if on_unknown not in ON_UNKNOWN:
        raise TableError(f"on_unknown: {on_unknown!r}, expected error or drop")
    spec = spec if isinstance(spec, Spec) else read_spec(spec)
    if spec.untyped and not spec.nodes[0].features:
        raise TableError(f"{spec.path}: nodes[0].features: an untyped graph's nodes need features (a typed graph's "
                         "types may be featureless: they learn embeddings)")
    t0 = time.perf_counter()
    fitted = _fitted_from(transforms_from, spec) if transforms_from is not None else {}
    nodes = [_NodePass(node, progress, fitted.get(node.type)) for node in spec.nodes]
    sizes = [n.ids.size for n in nodes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    num_nodes = int(offsets[-1])
    index = {n.table.type: i for i, n in enumerate(nodes)}
    relations = [r for e in spec.edges for r in [e.relation] + ([(e.relation[2], e.reverse, e.relation[0])]
                                                                if e.reverse else [])]
    target = next((i for i, n in enumerate(nodes) if n.table.label), 0)
    inputs = (spec.path, *(f for t in spec.nodes + spec.edges for f in t.source.files))
    with DatasetWriter(out, overwrite=overwrite, inputs=inputs) as writer:
        for i, n in enumerate(nodes):
            n.write_features(writer, NODE if spec.untyped else n.table.type)
        labels, num_classes, names, splits = nodes[target].labels_and_splits(int(offsets[target]))
        validate_node_data(sizes[target], num_classes, labels, splits, name=lambda k: f"{out}/{k}.npy",
                           first=None if spec.untyped else int(offsets[target]))
        ids = id_dtype(num_nodes)
        writer.save("labels", labels)
        for s in SPLITS:
            writer.save(s, splits[s].astype(ids))
        edges = _EdgePass(spec, nodes, index, offsets, relations, on_unknown, progress)
        typed = {} if spec.untyped else {"types_path": writer.tmp / "type_per_edge.npy",
                                         "num_types": len(relations), "ranges": edges.ranges(CSC_BUDGET)}
        indptr = edges_to_csc_file(edges.chunks(), num_nodes, writer.tmp / "indices.npy",
                                   symmetric=spec.untyped and spec.edges[0].undirected,
                                   expected_edges=edges.expected(), budget=CSC_BUDGET, **typed)
        writer.save("indptr", indptr.astype(offset_dtype(int(indptr[-1])), copy=False))
        del indptr
        extra = {}
        if edges.labelled is not None:
            extra["edge_labels"], names_e = edges.write_labels(writer)
        maps = {}
        for n in nodes:
            maps[NODE if spec.untyped else n.table.type] = n.write_ids(writer)
        transforms = {n.table.type: [{"column": f.column, "transform": f.transform, **(t.state() or {})}
                                     for f, t in zip(n.table.features, n.transforms)] for n in nodes}
        for n in nodes:
            n.say_unseen(transforms_from)
        tables = {"spec": str(Path(spec.path).resolve()), "id_maps": maps, "transforms": transforms,
                  **({"transforms_from": str(Path(transforms_from).resolve())} if transforms_from else {}),
                  **({"class_names": names} if names else {}),
                  **({"edge_class_names": names_e} if edges.labelled is not None and names_e else {})}
        schema = None if spec.untyped else {"node_types": [n.table.type for n in nodes], "node_type_offset": offsets,
                                            "edge_types": relations, "target_type": nodes[target].table.type}
        shape = ({"symmetric": spec.edges[0].undirected, "self_loops": False} if spec.untyped else
                 {"reverse_relations": all(e.reverse for e in spec.edges)})
        meta = writer.commit(name=spec.name or Path(out).name, num_classes=num_classes, schema=schema, tables=tables,
                             source={"loader": "tables", "spec": str(spec.path)}, **shape, **extra,
                             build_seconds=round(time.perf_counter() - t0, 2))
    return meta


def _bar(progress: bool, desc: str, total=None):
    return progress_bar(total=total, desc=desc, unit="row", unit_scale=True, disable=not progress, leave=False)


class _NodePass:
    """One node table: pass 1 (ids, labels, splits, fits) on construction; pass 2 on
    write_features."""

    def __init__(self, table: NodeTable, progress: bool, fitted: list | None = None):
        self.table, self.progress = table, progress
        self.transforms = [transform_for(f) for f in table.features]
        for f, t, state in zip(table.features, self.transforms, fitted or [None] * len(self.transforms)):
            if state is not None and t.needs_fit:
                t.load(state)
        label = table.label
        fitted = [(f, t) for f, t in zip(table.features, self.transforms) if t.needs_fit]
        columns = [table.id_col, *(f.column for f, _ in fitted)] + (
            [label.column] + ([label.split_col] if label.split_col else []) if label else [])
        chunks, where, self.label_chunks, self.split_chunks = [], [], [], []
        with _bar(progress, f"{table.type}: ids and statistics") as bar:
            for file, row, cols in batches(table.source, columns, f"node type {table.type}", ids=(table.id_col,),
                                           text=_names(table)):
                ids = cols[table.id_col]
                if ids.null_count:
                    first = int(np.flatnonzero(np.asarray(ids.is_null()))[0])
                    raise TableError(f"{file}: column {table.id_col!r}, row {row + first}: a null node id")
                chunks.append(ids)
                where.append((file, row, len(ids)))
                for f, t in fitted:
                    t.fit(cols[f.column], (file, row))
                if label:
                    self.label_chunks.append(cols[label.column])
                    if label.split_col:
                        self.split_chunks.append(cols[label.split_col])
                bar.update(len(ids))
        for t in self.transforms:
            t.finish()
        files = [w[0] for w in where]
        if label:  # one type over the files (a CSV file's empty column is of none)
            self.label_chunks = _class_ids(one_type(self.label_chunks, files, label.column), table)
            self.split_chunks = one_type(self.split_chunks, files, label.split_col) if label.split_col else []
        self.where = where
        self.ids = IdMap.build(chunks, where, table.id_col)
        if not self.ids.size:  # nothing to embed, and no width to give a feature
            files = ", ".join(map(str, table.source.files))
            raise TableError(f"node type {table.type}: its table has no rows ({files}); leave the type out of the spec")

    def write_features(self, writer: DatasetWriter, name: str) -> None:
        """Pass 2: the transformed feature rows into features(/TYPE).npy (a type without
        features is featureless)."""
        if not self.transforms:
            return
        table, dtype = self.table, np.dtype(self.table.feature_dtype)

        def rows():
            with _bar(self.progress, f"{table.type}: features", self.ids.size) as bar:
                for file, row, cols in batches(table.source, [f.column for f in table.features], table.type,
                                               text=_names(table)):
                    parts = [t.apply(cols[f.column], (file, row)) for f, t in zip(table.features, self.transforms)]
                    with np.errstate(over="ignore"):  # found below, by row and column
                        block = np.hstack(parts).astype(dtype)
                    bad = np.argwhere(~np.isfinite(block))
                    if len(bad):
                        feature = table.features[int(np.searchsorted(np.cumsum([p.shape[1] for p in parts]),
                                                                     bad[0][1], side="right"))]
                        raise TableError(f"{file}: column {feature.column!r}, row {row + bad[0][0]}: a feature value "
                                         f"beyond {dtype.name}'s range (feature_dtype {dtype.name})")
                    yield block
                    bar.update(len(block))

        blocks = rows()
        first = next(blocks, None)  # the width of a list column shows in its rows
        width = first.shape[1] if first is not None else sum(t.width or 0 for t in self.transforms)
        writer.write_blocks(feature_file(name), (self.ids.size, width), dtype,
                            itertools.chain([] if first is None else [first], blocks))

    def say_unseen(self, source) -> None:
        """One line per to_categorical column whose values an earlier build's vocabulary lacks."""
        for f, t in zip(self.table.features, self.transforms):
            if getattr(t, "unseen", 0):
                print(f"python -m fastsample.data tables: node type {self.table.type}: column {f.column!r}: "
                      f"{t.unseen:,} values not in {source}'s vocabulary (the first: {t.first_unseen!r}): no "
                      "category set for them", file=sys.stderr, flush=True)

    def labels_and_splits(self, first: int) -> tuple:
        """(labels, num_classes, class names or None, {split: global ids}) of this type (the
        target: the labelled one, or unlabelled rows and empty splits)."""
        if self.table.label is None:
            empty = np.zeros(0, np.int64)
            return np.full(self.ids.size, -1, np.int64), 1, None, dict.fromkeys(SPLITS, empty)
        at = lambda i: _at(self.where, i)
        labels, classes, names = _encode_labels(self.table.label, self.label_chunks, at)
        rows = _split_rows(self.table.label, labels, self.split_chunks, at)
        _refuse_empty_train(self.table.label, labels, rows, f"node type {self.table.type}")
        return labels, classes, names, {s: np.sort(r) + first for s, r in rows.items()}

    def write_ids(self, writer: DatasetWriter) -> str:
        """id_maps/TYPE.parquet: row k is the user's id of dense id k."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        file = f"id_maps/{self.table.type}.parquet"
        (writer.tmp / "id_maps").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": self.ids.column}), writer.tmp / file)
        return file


def _fitted_from(dataset, spec: Spec) -> dict:
    """{node type: [a fitted transform's state or None, per feature]} of ``dataset`` (an
    earlier build's meta.json), checked against ``spec``'s features: the same columns and
    transforms, in the same order, per type."""
    from fastsample.data.graph import read_meta

    kept = read_meta(dataset).get("tables", {}).get("transforms")
    if kept is None:
        raise TableError(f"{dataset}: keeps no fitted transforms (not built by data tables, or by a version "
                         "before they were kept): build it again")
    out = {}
    for node in spec.nodes:
        mine = [(f.column, f.transform) for f in node.features]
        theirs = [(k["column"], k["transform"]) for k in kept.get(node.type, [])]
        if mine != theirs:
            raise TableError(f"{spec.path}: node type {node.type}: features {mine or 'none'}, but {dataset} was "
                             f"built with {theirs or 'none'}: --transforms-from needs the same features")
        out[node.type] = [{k: v for k, v in state.items() if k not in ("column", "transform")} or None
                          for state in kept[node.type]]
    return out


CATEGORICAL = ("to_categorical", "hash", "bag")  # transforms whose values are names, not numbers


def _names(table) -> tuple:
    """A table's columns of names, which a CSV file gives as written: its categorical features
    and class labels (a CSV reader's guess would read 01 and 1 as one number)."""
    names = [f.column for f in getattr(table, "features", ()) if f.transform in CATEGORICAL]
    if table.label is not None and table.label.task != "regression":
        names.append(table.label.column)
    return tuple(names)


def _class_ids(chunks: list, table) -> list:
    """A CSV file's class labels (read as text) as class ids where every one is an integer as
    an integer is written (0, 7, -1; not 07 or 7.0), as before; else as they are: names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.source.format == "parquet" or table.label.task == "regression" or not chunks:
        return chunks
    if not all(pa.types.is_string(c.type) or pa.types.is_large_string(c.type) or pa.types.is_null(c.type)
               for c in chunks):
        return chunks
    integers = all(pc.all(pc.match_substring_regex(c, r"^-?(0|[1-9][0-9]{0,17})$")).as_py() in (True, None)
                   for c in chunks)
    return [c.cast(pa.int64()) for c in chunks] if integers else chunks


def _unlabelled(values) -> np.ndarray:
    return np.asarray(values.is_null()) if len(values) else np.zeros(0, bool)


def _refuse_one_class(label: Label, distinct: int, file: str, seen: list) -> None:
    """A classification label of fewer than two classes is nothing to learn: trained on, it
    reads as a perfect loss and accuracy."""
    if distinct < 2:
        raise TableError(f"{file}: column {label.column!r}: "
                         + (f"one class only ({seen[0]!r})" if distinct else "no labelled row")
                         + ": a classification needs at least two (or give task_type regression for numbers)")


def _encode_labels(label: Label, chunks: list, at) -> tuple:
    """(labels: int64 classes with -1 unlabelled, or float32 values with NaN; num_classes
    (0 for values); the class names where they were strings). ``at(i)``: 'FILE: row R' of row i."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.chunked_array(chunks).combine_chunks() if chunks else pa.array([], pa.int64())
    file = at(0).rsplit(": row", 1)[0] if len(values) else "?"
    missing = _unlabelled(values)
    if label.task == "regression":
        if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
            row = first_not_number(values) if pa.types.is_string(values.type) or \
                pa.types.is_large_string(values.type) else None
            if row is not None:
                raise TableError(f"{at(row)}, column {label.column!r}: {values[row].as_py()!r} is not a number (a "
                                 "regression label takes numbers)")
            raise TableError(f"{file}: column {label.column!r}: type {values.type}, but a regression label takes "
                             "numbers")
        with np.errstate(over="ignore"):  # found below, by row
            y = values.to_numpy(zero_copy_only=False).astype(np.float32)
        y[missing] = np.nan
        bad = np.flatnonzero(np.isinf(y))
        if len(bad):
            raise TableError(f"{at(bad[0])}, column {label.column!r}: a label that is infinite or beyond float32's "
                             "range")
        return y, 0, None
    if pa.types.is_integer(values.type):
        y = values.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        bad = np.flatnonzero(y[~missing] < 0)
        if len(bad):
            row = np.flatnonzero(~missing)[bad[0]]
            raise TableError(f"{at(row)}, column {label.column!r}: class {y[row]}, expected a class id >= 0 "
                             "or a class name")
        classes = int(y.max(initial=-1)) + 1 or 1
        distinct = len(np.unique(y[~missing]))
        _refuse_one_class(label, distinct, file, np.unique(y[~missing])[:1].tolist())
        if classes > max(2 * distinct, 1024):  # a logit per class id: ids this sparse are names
            raise TableError(f"{file}: column {label.column!r}: class ids up to {classes - 1:,} for {distinct:,} "
                             "distinct classes (a logit per id): give the classes as 0..K-1 or as names (strings)")
        return y, classes, None
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_dictionary(values.type):
        values = values.cast(pa.large_string())
        values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.large_string()), values)  # CSV's empty cell: null
        names = sorted(set(pc.unique(values.drop_null()).to_pylist()))
        _refuse_one_class(label, len(names), file, names[:1])
        index = pc.index_in(values, value_set=pa.array(names, pa.large_string()))
        return index.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64), max(len(names), 1), names
    raise TableError(f"{file}: column {label.column!r}: type {values.type}, but a class label takes class names "
                     "or integers")


def _split_rows(label: Label, labels: np.ndarray, chunks: list, at) -> dict:
    """{split: rows} from the split column, or from seeded fractions of the labelled rows."""
    import pyarrow as pa

    labelled = ~np.isnan(labels) if labels.dtype.kind == "f" else labels >= 0
    if label.split_pct is not None:
        rows = np.flatnonzero(labelled)
        rows = rows[np.random.default_rng(label.seed).permutation(len(rows))]
        # rounded where the fractions add up to, not each alone: [0.5, 0.5, 0] of 5 rows is 2 + 3, no row left out
        bounds = np.floor(np.cumsum([0.0, *label.split_pct]) * len(rows) + 0.5).astype(np.int64)
        bounds = np.minimum(bounds, len(rows))
        return {s: rows[bounds[i]:bounds[i + 1]] for i, s in enumerate(SPLITS)}
    values = pa.chunked_array(chunks).combine_chunks().cast(pa.large_string())
    text = np.asarray(values.fill_null("").to_numpy(zero_copy_only=False), dtype=object)
    bad = np.flatnonzero(~np.isin(text, ["", *SPLITS]))
    if len(bad):
        raise TableError(f"{at(bad[0])}, column {label.split_col!r}: {text[bad[0]]!r}, expected train, val, "
                         "test or null")
    out = {s: np.flatnonzero(text == s) for s in SPLITS}
    for s, rows in out.items():
        unlabelled = rows[~labelled[rows]]
        if len(unlabelled):
            raise TableError(f"{at(unlabelled[0])}, column {label.column!r}: null, but column "
                             f"{label.split_col!r} puts the row in {s} ({len(unlabelled):,} such rows): the label "
                             "column has nulls where the splits need labels")
    return out


def _refuse_empty_train(label: Label, labels: np.ndarray, rows: dict, what: str) -> None:
    """A label column none of whose rows trains is a TableError (a model would train on nothing)."""
    if len(rows["train"]):
        return
    labelled = int((~np.isnan(labels) if labels.dtype.kind == "f" else labels >= 0).sum())
    how = f"column {label.split_col!r} puts none in train" if label.split_col else \
        f"split_pct {list(label.split_pct)} leaves train none of them" if labelled else "every row is null"
    raise TableError(f"{what}: labels {label.column!r}: no training row ({labelled:,} labelled rows; {how})")


def _at(where: list, i: int) -> str:
    """'FILE: row R' of row i over a table's batches."""
    for file, first, length in where:
        if i < length:
            return f"{file}: row {first + i}"
        i -= length
    return "?"


class _EdgePass:
    """The edge tables (pass 3): their edges as the CSC builder's chunks, and the labelled
    relation's edges, labels and splits."""

    def __init__(self, spec: Spec, nodes: list, index: dict, offsets: np.ndarray, relations: list,
                 on_unknown: str, progress: bool):
        self.spec, self.nodes, self.index, self.offsets = spec, nodes, index, offsets
        self.relations, self.on_unknown, self.progress = relations, on_unknown, progress
        self.labelled = next((e for e in spec.edges if e.label is not None), None)
        self.unknown, self.shown, self.dropped = 0, [], 0
        self.kept = {"src": [], "dst": [], "label": [], "split": [], "where": []}

    def rows(self, table) -> int:
        """About how many rows the table has (Parquet says; a CSV's bytes / 16)."""
        if table.source.format == "parquet":
            return sum(parquet_rows(f) for f in table.source.files)
        return sum(f.stat().st_size // 16 for f in table.source.files)

    def expected(self) -> int:
        return sum(self.rows(e) * (2 if e.reverse or e.undirected else 1) for e in self.spec.edges)

    def ranges(self, budget: int) -> int:
        """The CSC builder's destination ranges for typed edges (typed_range_count)."""
        into = np.zeros(len(self.nodes))
        for e in self.spec.edges:
            rows = self.rows(e)
            into[self.index[e.relation[2]]] += rows
            if e.reverse:
                into[self.index[e.relation[0]]] += rows
        return typed_range_count(self.offsets, into, budget)

    def chunks(self):
        r = 0
        for table in self.spec.edges:
            s, _, d = table.relation
            label = table.label
            columns = [table.src_col, table.dst_col] + (
                [label.column] + ([label.split_col] if label.split_col else []) if label else [])
            with _bar(self.progress, f"{':'.join(table.relation)}: edges") as bar:
                for file, row, cols in batches(table.source, columns, f"relation {':'.join(table.relation)}",
                                               ids=(table.src_col, table.dst_col), text=_names(table)):
                    src = self._lookup(s, cols[table.src_col], file, row, table.src_col, table.source.format)
                    dst = self._lookup(d, cols[table.dst_col], file, row, table.dst_col, table.source.format)
                    bad = (src < 0) | (dst < 0)
                    keep = ~bad
                    if bad.any():
                        self._unknown(table, cols, bad, src, file, row)
                    src, dst = src[keep] + self.offsets[self.index[s]], dst[keep] + self.offsets[self.index[d]]
                    if label is not None:
                        self._keep_labelled(table, cols, keep, src, dst, file, row)
                    if self.spec.untyped:
                        yield src, dst
                    else:
                        yield src, dst, np.full(len(src), r, np.int64)
                        if table.reverse:
                            yield dst, src, np.full(len(src), r + 1, np.int64)
                    bar.update(len(keep))
            r += 2 if table.reverse else 1
        self._refuse_unknown()

    def _lookup(self, node_type: str, values, file, row, column, fmt: str) -> np.ndarray:
        if values.null_count:
            first = int(np.flatnonzero(np.asarray(values.is_null()))[0])
            raise TableError(f"{file}: column {column!r}, row {row + first}: a null node id")
        ids = self.nodes[self.index[node_type]].ids
        try:
            return ids.lookup(values)
        except TypeError:
            csv = "csv" in (fmt, self.nodes[self.index[node_type]].table.source.format)
            raise TableError(f"{file}: column {column!r}: ids of type {values.type}, but node type {node_type}'s "
                             f"table has {ids.column.type} ids" + (" (a CSV file's ids are read as text, as written)"
                                                                   if csv else "")) from None

    def _unknown(self, table, cols, bad, src, file, row) -> None:
        rows = np.flatnonzero(bad)
        self.unknown += len(rows)
        for i in rows[:_SHOWN - len(self.shown)]:
            column = table.src_col if src[i] < 0 else table.dst_col
            try:  # beside the spec: as its "files" named it (part-00000.parquet alone is every folder's)
                name = Path(file).resolve().relative_to(Path(self.spec.path).resolve().parent)
            except ValueError:
                name = file
            self.shown.append(f"{name} row {row + i}: {column} {cols[column][int(i)].as_py()!r}")

    def _refuse_unknown(self) -> None:
        if not self.unknown:
            return
        shown = "; ".join(self.shown) + (" ..." if self.unknown > len(self.shown) else "")
        if self.on_unknown == "error":
            raise TableError(f"{self.unknown:,} edges name a node id that its node table does not have ({shown}); "
                             "pass --on-unknown drop to leave them out")
        self.dropped = self.unknown
        print(f"python -m fastsample.data tables: dropped {self.unknown:,} edges naming unknown node ids ({shown})",
              file=sys.stderr, flush=True)

    def _keep_labelled(self, table, cols, keep, src, dst, file, row) -> None:
        label = table.label
        self.kept["src"].append(src)
        self.kept["dst"].append(dst)
        self.kept["label"].append(cols[label.column].filter(keep))
        if label.split_col:
            self.kept["split"].append(cols[label.split_col].filter(keep))
        self.kept["where"].append((file, row, np.flatnonzero(keep)))

    def write_labels(self, writer: DatasetWriter) -> tuple[dict, list | None]:
        """edge_labels/: the labelled relation's edges (global ids), labels and splits; its meta."""
        table, label = self.labelled, self.labelled.label
        if not sum(map(len, self.kept["src"])):
            raise TableError(f"relation {':'.join(table.relation)}: its labelled table has no edges")
        src, dst = np.concatenate(self.kept["src"]), np.concatenate(self.kept["dst"])
        files = [w[0] for w in self.kept["where"]]
        self.kept["label"] = _class_ids(one_type(self.kept["label"], files, label.column), table)
        if label.split_col:
            self.kept["split"] = one_type(self.kept["split"], files, label.split_col)
        # the kept rows' places in their files, for messages
        origin = np.concatenate([r + k for _, r, k in self.kept["where"]]) if self.kept["where"] else np.zeros(0, int)
        batch = np.repeat(np.arange(len(self.kept["where"])), [len(k) for _, _, k in self.kept["where"]])
        at = lambda i: f"{self.kept['where'][batch[i]][0]}: row {origin[i]}"
        labels, classes, names = _encode_labels(label, self.kept["label"], at)
        labelled = np.flatnonzero(~np.isnan(labels) if labels.dtype.kind == "f" else labels >= 0)  # unlabelled: as edges
        loops = labelled[src[labelled] == dst[labelled]]
        if len(loops):
            raise TableError(f"{at(loops[0])}: a labelled self-loop ({len(loops):,} in all); the graph stores none")
        n = int(self.offsets[-1])
        # an undirected relation's (u, v) and (v, u) are one edge: one label, in one split
        keys = (np.minimum(src, dst) * n + np.maximum(src, dst) if table.undirected else src * n + dst)[labelled]
        order = np.argsort(keys, kind="stable")
        twice = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        if len(twice):
            a, b = sorted((int(labelled[order[twice[0]]]), int(labelled[order[twice[0] + 1]])))
            raise TableError(f"{at(b)}: the edge is labelled twice (first at {at(a)}"
                             f"{'; undirected: either way round' if table.undirected else ''}); a labelled edge must "
                             "be unique")
        rows = _split_rows(label, labels, self.kept["split"], at)
        _refuse_empty_train(label, labels, rows, f"relation {':'.join(table.relation)}")
        edges = np.stack([src, dst], axis=1)
        for s in SPLITS:
            r = np.sort(rows[s])
            writer.save(f"{EDGE_LABELS}/{s}", edges[r])
            writer.save(f"{EDGE_LABELS}/{s}_labels", labels[r])
        # an untyped dataset's one relation is EDGE (its name in the spec is the user's)
        relation = list(EDGE) if self.spec.untyped else list(table.relation)
        reverse = (list(EDGE) if self.spec.untyped and table.undirected else
                   [table.relation[2], table.reverse, table.relation[0]] if table.reverse else None)
        meta = {"relation": relation, "reverse": reverse,
                "kind": "values" if label.task == "regression" else "classes", "num_classes": classes,
                "edges": {s: int(len(rows[s])) for s in SPLITS}}
        return meta, names
