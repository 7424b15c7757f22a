"""Convert a fastsample typed dataset directory into a DGL heterograph and partition it with
DGL 1.1.3's own partitioner (``dgl.distributed.partition_graph``, METIS), for the typed DistDGL
trainer (train_typed.py).

The dataset (fastsample/data/graph.py, DESIGN.md): global node ids, type t owning
[node_type_offset[t], node_type_offset[t+1]); CSC by destination (indptr over all nodes,
indices = global source ids); type_per_edge = the edge type (index into meta.json's
edge_types, canonical (src, rel, dst)) of every stored edge; features/TYPE.npy for the featured
types (meta.json's features[TYPE] is null for a featureless type); labels.npy and
train/val/test.npy for the target type (its local ids, which equal the global ids when the
target type is the first one; both conventions are handled).

The heterograph gets, per featured type, ndata 'feat'; on the target type 'label' and
'train_mask'. Featureless types get no data here: train_typed.py gives them a DistEmbedding.
Partitioning: METIS, balance_ntypes = {target: train mask} (so every other type and the
target's train / non-train nodes are each balanced), balance_edges=True, num_hops=1.

usage: python partition_typed.py DATASET OUTDIR [--parts 2] [--name typed]
"""
import argparse, json, os, resource, sys, time

import numpy as np
import torch

ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("dataset")
ap.add_argument("out")
ap.add_argument("--parts", type=int, default=2)
ap.add_argument("--name", default="typed", help="DGL graph name (train_typed.py --graph_name)")
ap.add_argument("--method", default="metis", choices=["metis", "random"])
args = ap.parse_args()

import dgl  # noqa: E402

t0 = time.perf_counter()
D = args.dataset
meta_path = os.path.join(D, "meta.json")
if not os.path.exists(meta_path):
    sys.exit(f"partition_typed.py: {meta_path} not found: DATASET must be a fastsample dataset directory")
meta = json.load(open(meta_path))
if "node_types" not in meta:
    sys.exit("partition_typed.py: the dataset is untyped (meta.json has no node_types); "
             "use ../../shared/peers/distdgl/partition.py for untyped graphs")
ntypes, off = meta["node_types"], np.asarray(meta["node_type_offset"], np.int64)
etypes = [tuple(e) for e in meta["edge_types"]]
target = meta["target_type"]
N = int(off[-1])

indptr = np.load(os.path.join(D, "indptr.npy")).astype(np.int64)
indices = np.load(os.path.join(D, "indices.npy"))
tpe = np.load(os.path.join(D, "type_per_edge.npy"))
dst = np.repeat(np.arange(N, dtype=np.int64), np.diff(indptr))
del indptr
data = {}
for k, (s, r, d) in enumerate(etypes):
    sel = np.flatnonzero(tpe == k)
    u = indices[sel].astype(np.int64) - off[ntypes.index(s)]
    v = dst[sel] - off[ntypes.index(d)]
    data[(s, r, d)] = (torch.from_numpy(u), torch.from_numpy(v))
del indices, dst, tpe, sel
num_nodes = {t: int(off[i + 1] - off[i]) for i, t in enumerate(ntypes)}
g = dgl.heterograph(data, num_nodes_dict=num_nodes)
del data

feats = meta.get("features") or {}
for i, t in enumerate(ntypes):
    if feats.get(t):
        g.nodes[t].data["feat"] = torch.from_numpy(np.load(os.path.join(D, "features", f"{t}.npy")).astype(np.float32))
ti, nt = ntypes.index(target), num_nodes[target]
labels = np.load(os.path.join(D, "labels.npy"))
if len(labels) == N:
    labels = labels[off[ti]:off[ti + 1]]
assert len(labels) == nt, (len(labels), nt)
g.nodes[target].data["label"] = torch.from_numpy(labels.astype(np.int64))
for split in ("train", "val", "test"):
    ids = np.load(os.path.join(D, f"{split}.npy")).astype(np.int64)
    if ids.size and ids.max() >= nt:  # global ids
        ids = ids - off[ti]
    m = torch.zeros(nt, dtype=torch.bool)
    m[torch.from_numpy(ids)] = True
    g.nodes[target].data[f"{split}_mask"] = m
t1 = time.perf_counter()
print(f"built heterograph: {dict(num_nodes)}, {g.num_edges()} edges in {len(etypes)} edge types, "
      f"featured {[t for t in ntypes if 'feat' in g.nodes[t].data]}, "
      f"{int(g.nodes[target].data['train_mask'].sum())} train {target} in {t1 - t0:.1f}s", flush=True)

dgl.distributed.partition_graph(
    g, args.name, args.parts, args.out, num_hops=1, part_method=args.method,
    balance_ntypes={target: g.nodes[target].data["train_mask"]} if args.parts > 1 else None,
    balance_edges=args.parts > 1,
)
t2 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"partition_graph({args.method}, {args.parts} parts): {t2 - t1:.1f}s (total {t2 - t0:.1f}s), "
      f"peak RSS {peak:.2f} GiB", flush=True)
info = {"dataset": os.path.abspath(D), "target_type": target, "node_types": ntypes,
        "featureless": [t for t in ntypes if not feats.get(t)],
        "feature_dims": {t: int(g.nodes[t].data["feat"].shape[1]) for t in ntypes if "feat" in g.nodes[t].data},
        "num_classes": int(meta["num_classes"]), "method": args.method, "num_parts": args.parts,
        "build_s": t1 - t0, "partition_graph_s": t2 - t1, "peak_rss_gib": peak}
with open(os.path.join(args.out, "typed_info.json"), "w") as f:
    json.dump(info, f, indent=1)
