"""What `python -m fastsample.data info` prints about a dataset."""

from __future__ import annotations

import numpy as np

from fastsample.graph import SPLITS, Dataset


def summarize(ds: Dataset) -> dict:
    deg = ds.graph.in_degrees()
    n = ds.graph.num_nodes
    topo = ds.graph.indptr.nbytes + ds.graph.indices.nbytes
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
        "feature_dim": int(ds.features.shape[1]),
        "feature_dtype": ds.features.dtype.name,
        "classes": ds.num_classes,
        "labelled": int((np.asarray(ds.labels) >= 0).sum()),
        "splits": {s: len(getattr(ds, s)) for s in SPLITS},
        "bytes": {"topology": int(topo), "features": int(ds.features.nbytes)},
    }
    return stats


def _size(b: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b} B"
        b /= 1024


def format_summary(s: dict) -> str:
    d = s["in_degree"]
    ratio = d["max"] / d["mean"] if d["mean"] else float("nan")
    return "\n".join([
        f"dataset     {s['name']}  ({s['path']})",
        f"nodes       {s['nodes']:,}",
        f"edges       {s['edges']:,} (directed; undirected graphs store both directions)",
        f"in-degree   mean {d['mean']:.2f}  median {d['median']:.0f}  p99 {d['p99']:.0f}  "
        f"max {d['max']:,} ({ratio:.0f}x mean)  isolated {d['isolated']:,}",
        f"features    {s['feature_dim']} x {s['feature_dtype']}",
        f"classes     {s['classes']}  ({s['labelled']:,} labelled nodes)",
        "splits      " + "  ".join(f"{k} {v:,}" for k, v in s["splits"].items()),
        f"bytes       topology {_size(s['bytes']['topology'])}  features {_size(s['bytes']['features'])}",
    ])
