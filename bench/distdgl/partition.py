"""Convert a fastsample dataset directory (untyped or typed) into a DGL graph and partition it
with DGL's own partitioner (``dgl.distributed.partition_graph``, METIS), for the DistDGL trainer
(train.py). Runs under whichever DGL the python has: 1.1.3, or 2.1 with --graphbolt, which then
converts the partitions for GraphBolt's sampler (``dgl.distributed.dgl_partition_to_graphbolt``:
each partition's graph also saved as a FusedCSCSamplingGraph, which DistDGL's servers sample
from when started with ``initialize(..., use_graphbolt=True)``).

The dataset (fastsample/data/graph.py, docs/datasets.md): CSC by destination (indptr over all
nodes, indices = source ids), labels.npy and train/val/test.npy.
  untyped  features.npy; the graph is a homogeneous dgl.graph with ndata 'feat', 'label',
           'train_mask'.
  typed    global node ids, type t owning [node_type_offset[t], node_type_offset[t+1]);
           type_per_edge = the edge type (index into meta.json's edge_types, canonical (src, rel,
           dst)) of every stored edge; features/TYPE.npy for the featured types (meta.json's
           features[TYPE] is null for a featureless type); labels and splits of the target type
           (its local ids, which equal the global ids when the target type is the first one; both
           conventions are handled). The heterograph gets, per featured type, ndata 'feat'; on the
           target type 'label' and 'train_mask'. Featureless types get no data here: train.py gives
           them a DistEmbedding.
Partitioning: METIS, the train mask balanced (balance_ntypes; typed: {target: train mask}, so
every other type and the target's train / non-train nodes are each balanced), balance_edges=True,
num_hops=1. info.json beside the partition config tells train.py the kind, the target type, the
featured types' widths, the featureless types and the classes.

usage: python partition.py DATASET OUTDIR [--parts 2] [--name NAME] [--graphbolt]
"""
import argparse, json, os, resource, sys, time

import numpy as np
import torch

ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("dataset")
ap.add_argument("out")
ap.add_argument("--parts", type=int, default=2)
ap.add_argument("--name", default="graph", help="DGL graph name (info.json tells train.py)")
ap.add_argument("--method", default="metis", choices=["metis", "random"])
ap.add_argument("--graphbolt", action="store_true",
                help="DGL >= 2.1: also convert the partitions for GraphBolt (dgl_partition_to_graphbolt)")
args = ap.parse_args()

import dgl  # noqa: E402

if args.graphbolt and not hasattr(dgl.distributed, "dgl_partition_to_graphbolt"):
    sys.exit(f"partition.py: --graphbolt needs DGL 2.1 or later (this python has DGL {dgl.__version__})")
t0 = time.perf_counter()
D = args.dataset
meta_path = os.path.join(D, "meta.json")
if not os.path.exists(meta_path):
    sys.exit(f"partition.py: {meta_path} not found: DATASET must be a fastsample dataset directory")
meta = json.load(open(meta_path))
typed = "node_types" in meta
if typed:
    ntypes, off = meta["node_types"], np.asarray(meta["node_type_offset"], np.int64)
    etypes = [tuple(e) for e in meta["edge_types"]]
    target = meta["target_type"]
else:
    ntypes, off, etypes, target = ["_N"], np.asarray([0, meta["num_nodes"]], np.int64), [("_N", "_E", "_N")], "_N"
N = int(off[-1])

indptr = np.load(os.path.join(D, "indptr.npy")).astype(np.int64)
indices = np.load(os.path.join(D, "indices.npy"))
dst = np.repeat(np.arange(N, dtype=np.int64), np.diff(indptr))
del indptr
num_nodes = {t: int(off[i + 1] - off[i]) for i, t in enumerate(ntypes)}
if typed:
    tpe = np.load(os.path.join(D, "type_per_edge.npy"))
    data = {}
    for k, (s, r, d) in enumerate(etypes):
        sel = np.flatnonzero(tpe == k)
        u = indices[sel].astype(np.int64) - off[ntypes.index(s)]
        v = dst[sel] - off[ntypes.index(d)]
        data[(s, r, d)] = (torch.from_numpy(u), torch.from_numpy(v))
    del indices, dst, tpe, sel
    g = dgl.heterograph(data, num_nodes_dict=num_nodes)
    del data
    feats = meta.get("features") or {}
    for t in ntypes:
        if feats.get(t):
            g.nodes[t].data["feat"] = torch.from_numpy(
                np.load(os.path.join(D, "features", f"{t}.npy")).astype(np.float32))
else:
    g = dgl.graph((torch.from_numpy(indices.astype(np.int64)), torch.from_numpy(dst)), num_nodes=N)
    del indices, dst
    g.ndata["feat"] = torch.from_numpy(np.load(os.path.join(D, "features.npy")).astype(np.float32))
ti, nt = ntypes.index(target), num_nodes[target]
labels = np.load(os.path.join(D, "labels.npy"))
if len(labels) == N:
    labels = labels[off[ti]:off[ti + 1]]
assert len(labels) == nt, (len(labels), nt)
g.nodes[target].data["label"] = torch.from_numpy(labels.astype(np.int64))
for split in ("train", "val", "test"):
    ids = np.load(os.path.join(D, f"{split}.npy")).astype(np.int64)
    if typed and ids.size and ids.max() >= nt:  # global ids
        ids = ids - off[ti]
    m = torch.zeros(nt, dtype=torch.bool)
    m[torch.from_numpy(ids)] = True
    g.nodes[target].data[f"{split}_mask"] = m
t1 = time.perf_counter()
print(f"built {'heterograph' if typed else 'graph'}: {dict(num_nodes)}, {g.num_edges()} edges in "
      f"{len(etypes)} edge types, featured {[t for t in ntypes if 'feat' in g.nodes[t].data]}, "
      f"{int(g.nodes[target].data['train_mask'].sum())} train {target} in {t1 - t0:.1f}s", flush=True)

train_mask = g.nodes[target].data["train_mask"]
dgl.distributed.partition_graph(
    g, args.name, args.parts, args.out, num_hops=1, part_method=args.method,
    balance_ntypes=({target: train_mask} if typed else train_mask) if args.parts > 1 else None,
    balance_edges=args.parts > 1,
)
t2 = time.perf_counter()
if args.graphbolt:
    dgl.distributed.dgl_partition_to_graphbolt(os.path.join(args.out, f"{args.name}.json"))
t3 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"partition_graph({args.method}, {args.parts} parts): {t2 - t1:.1f}s"
      + (f", to GraphBolt {t3 - t2:.1f}s" if args.graphbolt else "") + f" (total {t3 - t0:.1f}s), "
      f"peak RSS {peak:.2f} GiB", flush=True)
info = {"dataset": os.path.abspath(D), "kind": "typed" if typed else "untyped", "target_type": target,
        "node_types": ntypes, "featureless": [t for t in ntypes if "feat" not in g.nodes[t].data],
        "feature_dims": {t: int(g.nodes[t].data["feat"].shape[1]) for t in ntypes if "feat" in g.nodes[t].data},
        "num_classes": int(meta["num_classes"]), "method": args.method, "num_parts": args.parts,
        "graphbolt": args.graphbolt, "dgl": dgl.__version__, "graph_name": args.name,
        "build_s": t1 - t0, "partition_graph_s": t2 - t1, "graphbolt_s": t3 - t2, "peak_rss_gib": peak}
with open(os.path.join(args.out, "info.json"), "w") as f:
    json.dump(info, f, indent=1)
