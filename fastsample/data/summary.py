"""What `python -m fastsample.data info` prints about a dataset."""

from __future__ import annotations

import numpy as np

from fastsample.atomic import format_bytes
from fastsample.data.graph import NODE, SPLITS, Dataset


def summarize(ds: Dataset) -> dict:
    """A dataset's figures (sizes, degree statistics, splits, bytes) as a JSON-able dict.

    Args:
        ds: a loaded dataset (fastsample.data.graph.load_dataset).
    Returns:
        The summary that format_summary prints.
    """
    deg = ds.graph.in_degrees()
    n = ds.graph.num_nodes
    stats = {
        "name": ds.name,
        "path": str(ds.path),
        "nodes": n,
        "edges": ds.graph.num_edges,
        "in_degree": {
            "mean": float(deg.mean()) if n else 0.0,
            "median": float(np.median(deg)) if n else 0.0,
            "p99": float(np.percentile(deg, 99)) if n else 0.0,
            "max": int(deg.max()) if n else 0,
            "isolated": int((deg == 0).sum()),
        },
        "classes": ds.num_classes,
        "labelled": int((~np.isnan(ds.labels) if np.asarray(ds.labels).dtype.kind == "f" else
                         np.asarray(ds.labels) >= 0).sum()),
        "splits": {s: len(getattr(ds, s)) for s in SPLITS},
    }
    g = ds.graph
    counts = g.edges_per_type()
    stats.update(
        feature_dim=ds.feature_dim,
        target_type=ds.node_type_names[ds.target_index],
        node_types={t: int(g.node_type_offset[i + 1] - g.node_type_offset[i]) for i, t in enumerate(g.node_types)},
        edge_types={":".join(e): int(c) for e, c in zip(g.edge_types, counts)},
        features={t: None if f is None else f"{f.shape[1]} x {f.dtype.name}" for t, f in ds.shards.items()},
        bytes={"topology": int(g.indptr.nbytes + sum(a.nbytes for a in g.edge_arrays().values())),
               "features": int(sum(f.nbytes for f in ds.shards.values() if f is not None))})
    return stats


def non_finite_rows(features, first: int = 5, chunk_bytes: int = 64 << 20) -> dict:
    """Rows of a feature matrix holding NaN or ±inf: {"rows": count, "first": [row ids]}.
    Reads the (memory-mapped) matrix in chunks, so its memory is bounded on any size."""
    step = max(1, chunk_bytes // max(1, features.shape[1] * features.dtype.itemsize))
    count, found = 0, []
    for lo in range(0, features.shape[0], step):
        block = np.asarray(features[lo:lo + step])
        if block.dtype.kind != "f":  # integer features are finite
            break
        bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
        count += len(bad)
        found.extend(int(lo + b) for b in bad[:max(0, first - len(found))])
    return {"rows": count, "first": found}


def check_features(ds: Dataset) -> dict:
    """non_finite_rows for every feature matrix: {node type (or "features"): its result}.
    Typed data's row ids are global node ids (the type's offset added)."""
    out = {}
    for i, (t, f) in enumerate(ds.shards.items()):
        if f is not None:
            r = non_finite_rows(f)
            out[t] = {"rows": r["rows"], "first": [int(ds.graph.node_type_offset[i]) + k for k in r["first"]]}
    return out


def format_check(check: dict) -> str:
    """check_features' result as ``info --check`` prints it."""
    bad = {k: v for k, v in check.items() if v["rows"]}
    if not bad:
        return "check       every feature row is finite"
    return "check       " + "  ".join(
        f"{'features' if k == NODE else k}: {v['rows']:,} rows with NaN or inf (first: {', '.join(map(str, v['first']))})" for k, v in bad.items())


def format_summary(s: dict) -> str:
    """summarize()'s dict as the lines ``python -m fastsample.data info`` prints."""
    d = s["in_degree"]
    ratio = d["max"] / d["mean"] if d["mean"] else float("nan")
    return "\n".join([
        f"dataset     {s['name']}  ({s['path']})",
        f"nodes       {s['nodes']:,}",
        f"edges       {s['edges']:,} (directed; undirected graphs store both directions)",
        f"in-degree   mean {d['mean']:.2f}  median {d['median']:.0f}  p99 {d['p99']:.0f}  "
        f"max {d['max']:,} ({ratio:.0f}x mean)  isolated {d['isolated']:,}",
        # the one-type case's type and relation have no names to show
        *([f"features    {s['features'][NODE]}"] if list(s["node_types"]) == [NODE] else
          ["node types  " + "  ".join(f"{t} {c:,}" + ("" if s["features"][t] else " (featureless)")
                                       for t, c in s["node_types"].items()),
           "edge types  " + "  ".join(f"{e} {c:,}" for e, c in s["edge_types"].items()),
           "features    " + "  ".join(f"{t} {f}" for t, f in s["features"].items() if f)]),
        (f"classes     {s['classes']}" if s["classes"] else "targets     float (node regression)") +
        f"  ({s['labelled']:,} labelled" +
        (" nodes)" if s["target_type"] == NODE else f" {s['target_type']} nodes)"),
        "splits      " + "  ".join(f"{k} {v:,}" for k, v in s["splits"].items()),
        *(["link split  " + ("" if s["link"]["relation"] is None else f"{s['link']['relation']}  ") +
           "  ".join(f"{k} {v:,}" for k, v in s["link"]["edges"].items()) +
           f" edges  ({s['link']['negatives']} fixed negatives each)"] if s.get("link") else []),
        *(["edge labels " + ("" if s["edge_labels"]["relation"] is None else f"{s['edge_labels']['relation']}  ") +
           "  ".join(f"{k} {v:,}" for k, v in s["edge_labels"]["edges"].items()) + " edges  (" +
           (f"{s['edge_labels']['num_classes']} classes)" if s["edge_labels"]["kind"] == "classes" else
            "float targets)")] if s.get("edge_labels") else []),
        f"bytes       topology {format_bytes(s['bytes']['topology'])}  "
        f"features {format_bytes(s['bytes']['features'])}",
    ])
