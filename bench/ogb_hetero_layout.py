"""Write a typed dataset in OGB's heterogeneous node-property layout (ogbn-mag's raw/ and
split/ files, fastsample/data/ogb_hetero.py), so that the OGB reader's path can be run on
a graph of real size offline: one direction of each relation (its rev_ twin dropped: the
reader adds it back), features for --featured types only (ogbn-mag: paper), the others
featureless (learnable embeddings when trained), the target type's labels and splits.

    python bench/ogb_hetero_layout.py data/hetero-small data/mag-like --featured paper
    python -m fastsample.data ogb data/mag-like data/mag-like-ds
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np

from fastsample.data.graph import load_dataset


def _gz(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.writelines(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a typed dataset directory")
    p.add_argument("out", help="the OGB-layout directory to write")
    p.add_argument("--featured", default="paper", help="comma-separated node types that keep their features")
    args = p.parse_args(argv)
    ds, out = load_dataset(args.dataset), Path(args.out)
    g = ds.graph
    counts = np.diff(g.node_type_offset)
    raw = out / "raw"
    _gz(raw / "num-node-dict.csv.gz", [",".join(g.node_types) + "\n", ",".join(map(str, counts)) + "\n"])
    dst = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(g.indptr))
    types = np.asarray(g.type_per_edge)
    for r, (s, rel, d) in enumerate(g.edge_types):
        if rel.startswith("rev_"):
            continue
        mine = types == r
        a = np.asarray(g.indices, dtype=np.int64)[mine] - g.node_type_offset[g.node_types.index(s)]
        b = dst[mine] - g.node_type_offset[g.node_types.index(d)]
        folder = raw / "relations" / f"{s}___{rel}___{d}"
        _gz(folder / "edge.csv.gz", (f"{x},{y}\n" for x, y in zip(a.tolist(), b.tolist())))
        _gz(folder / "num-edge-list.csv.gz", [f"{int(mine.sum())}\n"])
    for t in args.featured.split(","):
        feats = np.asarray(ds.features[t])
        _gz(raw / "node-feat" / t / "node-feat.csv.gz", (",".join(f"{v:.6g}" for v in row) + "\n" for row in feats))
    target, lo = ds.target_type, int(ds.graph.node_type_offset[ds.target_index])
    _gz(raw / "node-label" / target / "node-label.csv.gz", (f"{int(y)}\n" for y in np.asarray(ds.labels)))
    for name, split in (("train", ds.train), ("valid", ds.val), ("test", ds.test)):
        _gz(out / "split" / "time" / target / f"{name}.csv.gz", (f"{int(i) - lo}\n" for i in np.asarray(split)))
    print(f"{out}: {len(g.node_types)} node types, {sum(1 for e in g.edge_types if not e[1].startswith('rev_'))} "
          f"relations, features for {args.featured}")


if __name__ == "__main__":
    main()
