"""The tables builder (python -m fastsample.data tables) on a dataset written out as tables.

    python bench/tables.py export DATASET TABLES [--format parquet|csv] [--int-ids]
    python bench/tables.py roundtrip DATASET [--work DIR]
    python bench/tables.py speed DATASET [--work DIR]

export   writes DATASET as tables and a spec (TABLES/spec.json): a node table per node type
         (string ids "TYPE-k" unless --int-ids, its features as one fixed-size list column,
         the target type's labels as class names "class-C" (or floats) and a split column),
         an edge table per relation (every stored edge, in CSC order).
roundtrip  exports DATASET, builds it back, and checks that the topology, the features
         (bitwise), the labels and the splits are the original's; exit status 1 otherwise.
speed    exports DATASET (untyped) as Parquet with integer ids, builds it back, and reports
         the build's time, edges/s and peak RSS beside the plain way a user would script it
         (pandas reads each table whole, ids mapped with an Index, edges_to_csc in memory,
         write_dataset) on the same tables, in the same run; both built datasets must equal
         DATASET. GraphStorm's gconstruct, the reference for this step, needs DGL and
         GraphStorm's own stack, which this bench does not install.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from fastsample.data.graph import SPLITS, describe_types, load_dataset

ROWS = 1 << 20  # rows per written batch


def _ids(t: str, lo: int, hi: int, int_ids: bool):
    if int_ids:
        return pa.array(np.arange(lo, hi, dtype=np.int64))
    return pa.array([f"{t}-{k}" for k in range(lo, hi)], pa.string())


def _writer(path: Path, schema, fmt: str):
    return pq.ParquetWriter(path, schema) if fmt == "parquet" else pcsv.CSVWriter(path, schema)


def export(dataset, out, fmt: str = "parquet", int_ids: bool = False) -> Path:
    """DATASET as tables in OUT (see the module doc); returns the spec's path."""
    ds = load_dataset(dataset)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    g, schema = ds.graph, describe_types(ds.meta)
    offsets = np.asarray(schema["node_type_offset"], dtype=np.int64)
    names = list(schema["node_types"])
    target = ds.target_index
    values = np.asarray(ds.labels).dtype.kind == "f"
    split_of = np.full(int(offsets[target + 1] - offsets[target]), None, dtype=object)
    for s in SPLITS:
        split_of[np.asarray(getattr(ds, s), dtype=np.int64) - offsets[target]] = s
    spec = {"name": ds.name, "nodes": [], "edges": []}
    ext = "parquet" if fmt == "parquet" else "csv"
    for i, t in enumerate(names):
        n = int(offsets[i + 1] - offsets[i])
        x = ds.shards[t]
        fields = [pa.field("id", pa.int64() if int_ids else pa.string())]
        if x is not None:
            if fmt == "csv":  # a CSV holds scalars: one column per feature
                fields += [pa.field(f"f{j}", pa.from_numpy_dtype(x.dtype)) for j in range(x.shape[1])]
            else:
                fields.append(pa.field("feat", pa.list_(pa.from_numpy_dtype(x.dtype), x.shape[1])))
        labelled = i == target
        if labelled:
            fields += [pa.field("label", pa.float32() if values else pa.string()), pa.field("split", pa.string())]
        sch = pa.schema(fields)
        file = out / f"nodes-{t}.{ext}"
        with _writer(file, sch, fmt) as w:
            for lo in range(0, n, ROWS):
                hi = min(n, lo + ROWS)
                cols = [_ids(t, lo, hi, int_ids)]
                if x is not None:
                    block = np.asarray(x[lo:hi])
                    cols += ([pa.array(block[:, j]) for j in range(block.shape[1])] if fmt == "csv" else
                             [pa.FixedSizeListArray.from_arrays(pa.array(block.ravel()), block.shape[1])])
                if labelled:
                    y = np.asarray(ds.labels[lo:hi])
                    if values:
                        cols.append(pa.array(y, mask=np.isnan(y)))
                    else:
                        cols.append(pa.array([None if c < 0 else f"class-{c:04d}" for c in y.tolist()], pa.string()))
                    cols.append(pa.array(split_of[lo:hi].tolist(), pa.string()))
                w.write_table(pa.Table.from_arrays(cols, schema=sch))
        node = {"node_type": t, "files": file.name, "node_id_col": "id",
                "features": ([{"feature_col": f"f{j}"} for j in range(x.shape[1])] if fmt == "csv" else
                             [{"feature_col": "feat"}]) if x is not None else [],
                "feature_dtype": x.dtype.name if x is not None else "float32"}
        if labelled:
            node["labels"] = [{"label_col": "label", "task_type": "regression" if values else "classification",
                               "split_col": "split"}]
        spec["nodes"].append(node)
    indptr = np.asarray(g.indptr, dtype=np.int64)
    types = g.edge_type_array()
    for r, (s, rel, d) in enumerate(schema["edge_types"]):
        file = out / f"edges-{r}-{rel}.{ext}"
        si, di = names.index(s), names.index(d)
        sch = pa.schema([pa.field("src", pa.int64() if int_ids else pa.string()),
                         pa.field("dst", pa.int64() if int_ids else pa.string())])
        with _writer(file, sch, fmt) as w:
            for lo in range(0, g.num_nodes, ROWS):  # destinations in blocks: the CSC's order
                hi = min(g.num_nodes, lo + ROWS)
                a, b = indptr[lo], indptr[hi]
                mine = np.flatnonzero(np.asarray(types[a:b]) == r)
                src = np.asarray(g.indices[a:b], dtype=np.int64)[mine] - offsets[si]
                dst = np.repeat(np.arange(lo, hi), np.diff(indptr[lo:hi + 1]))[mine] - offsets[di]
                as_ids = (lambda v, t: pa.array(v)) if int_ids else (
                    lambda v, t: pa.array([f"{t}-{k}" for k in v.tolist()], pa.string()))
                w.write_table(pa.Table.from_arrays([as_ids(src, s), as_ids(dst, d)], schema=sch))
        spec["edges"].append({"relation": [s, rel, d], "files": file.name, "source_id_col": "src",
                              "dest_id_col": "dst"})
    path = out / "spec.json"
    path.write_text(json.dumps(spec, indent=2) + "\n")
    return path


def compare(original, built) -> list[str]:
    """What differs between two dataset directories (empty: the same dataset)."""
    a, b = load_dataset(original), load_dataset(built)
    out = []
    for key in ("indptr", "indices"):
        if not np.array_equal(getattr(a.graph, key), getattr(b.graph, key)):
            out.append(key)
    if not np.array_equal(a.graph.edge_type_array(), b.graph.edge_type_array()):
        out.append("type_per_edge")
    for t, x in a.shards.items():
        y = b.shards.get(t)
        if (x is None) != (y is None) or x is not None and (x.dtype != y.dtype or x.tobytes() != np.asarray(y).tobytes()):
            out.append(f"features {t}")
    if not np.array_equal(a.labels, b.labels, equal_nan=np.asarray(a.labels).dtype.kind == "f"):
        out.append("labels")
    out += [s for s in SPLITS if not np.array_equal(getattr(a, s), getattr(b, s))]
    for key in ("node_types", "node_type_offset", "edge_types", "target_type", "num_classes"):
        if a.meta.get(key) != b.meta.get(key):
            out.append(f"meta {key}")
    return out


def baseline(spec_path, out) -> None:
    """The plain script (see the module doc) for an exported untyped dataset's spec."""
    import pandas as pd

    from fastsample.data.edges import edges_to_csc
    from fastsample.data.graph import write_dataset

    spec_path = Path(spec_path)
    spec = json.loads(spec_path.read_text())
    (node,), (edge,) = spec["nodes"], spec["edges"]
    nodes = pd.read_parquet(spec_path.parent / node["files"])
    index = pd.Index(nodes["id"])
    x = np.stack(nodes["feat"].to_numpy()).astype(node["feature_dtype"])
    names = sorted(nodes["label"].dropna().unique())
    labels = pd.Categorical(nodes["label"], categories=names).codes.astype(np.int64)
    splits = {s: np.flatnonzero((nodes["split"] == s).to_numpy()) for s in SPLITS}
    del nodes
    edges = pd.read_parquet(spec_path.parent / edge["files"])
    src, dst = index.get_indexer(edges["src"]), index.get_indexer(edges["dst"])
    del edges
    graph = edges_to_csc(src, dst, len(index), symmetric=False)
    del src, dst
    write_dataset(out, graph, x, labels, splits["train"], splits["val"], splits["test"], name=spec["name"],
                  num_classes=len(names), overwrite=True)
    from fastsample.cli import peak_rss_mib

    print(peak_rss_mib())


def _timed(argv: list) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of a command in a process of its own that prints its peak last."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    return time.perf_counter() - t0, float(proc.stdout.split()[-1])


def _build(spec: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of python -m fastsample.data tables in a process of its own."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fastsample.data", "tables", str(spec), str(out), "--quiet",
                           "--overwrite", "--json"], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    return time.perf_counter() - t0, json.loads(proc.stdout)["peak_rss_mib"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("export", "roundtrip", "speed", "baseline"))
    p.add_argument("dataset")
    p.add_argument("tables", nargs="?", help="export: the folder to write")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--int-ids", action="store_true")
    p.add_argument("--work", help="roundtrip, speed: where to write (default: a temporary folder)")
    args = p.parse_args(argv)
    if args.command == "export":
        print(export(args.dataset, args.tables, args.format, args.int_ids))
        return 0
    if args.command == "baseline":  # (the speed run's own subprocess: DATASET is the spec, TABLES the output)
        baseline(args.dataset, args.tables)
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="fastsample-tables-"))
    try:
        spec = export(args.dataset, work / "tables", args.format, args.int_ids or args.command == "speed")
        seconds, rss = _build(spec, work / "built")
        edges = load_dataset(work / "built").graph.num_edges
        print(f"settings: {args.dataset} ({edges:,} edges), {args.format}, "
              f"{'integer' if args.int_ids or args.command == 'speed' else 'string'} ids, CPU {_cpu()}")
        print(f"fastsample.data tables: {seconds:.1f} s, {edges / seconds:,.0f} edges/s, peak RSS {rss:,.0f} MiB")
        if args.command == "speed":
            plain_s, plain_rss = _timed([sys.executable, __file__, "baseline", str(spec), str(work / "plain")])
            print(f"pandas + write_dataset: {plain_s:.1f} s, {edges / plain_s:,.0f} edges/s, peak RSS "
                  f"{plain_rss:,.0f} MiB; tables {plain_s / seconds:.2f}x faster")
            for name in ("built", "plain"):
                diff = compare(args.dataset, work / name)
                print(f"{name}: " + ("the same dataset" if not diff else f"differs in: {', '.join(diff)}"))
        if args.command == "roundtrip":
            diff = compare(args.dataset, work / "built")
            print("the same dataset" if not diff else f"differs in: {', '.join(diff)}")
            return 1 if diff else 0
        return 0
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def _cpu() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
