"""Times DGL's samplers on the graph and batches bench/sampling.py gives it.

Runs under a Python that has DGL (see bench/README.md); reads a job JSON, prints one
JSON record per line. Variants:
  dgl113: dgl.sampling.sample_neighbors + dgl.to_block per layer (DGL 1.x's path)
  dgl210: dgl.sampling.sample_neighbors_fused per layer with a reused `mapping`
Graph ids are int32 for dgl113 (its fastest correct setting) and int64 for dgl210: DGL
2.1.0's fused sampler returns wrong, shrinking blocks on int32 graphs once the mapping
is reused (seen here), and bench/sampling.py flags such results.

On a typed dataset (type_per_edge.npy; the same fanout for every edge type):
  dgl113, dgl210-etype: dgl.sampling.sample_etype_neighbors on the homogenized graph
      (DistDGL's layout: edge ids grouped by type, each node's in-edges sorted by type,
      etype_sorted=True) + dgl.to_block per layer
  dgl210: dgl.sampling.sample_neighbors_fused on the heterograph (a CSC per relation),
      seeds per node type, a reused mapping
"""

import json
import os
import sys

from dgl_import import import_dgl

dgl = import_dgl()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from timing import median_ms, time_batches  # noqa: E402


def typed_sampler(job, variant):
    """(sample_blocks(seeds, fanouts) -> sampled edges, id dtype) for a typed dataset."""
    meta = json.load(open(os.path.join(job["graph"], "meta.json")))
    indptr = np.load(os.path.join(job["graph"], "indptr.npy")).astype(np.int64)
    indices = np.load(os.path.join(job["graph"], "indices.npy")).astype(np.int64)
    types = np.load(os.path.join(job["graph"], "type_per_edge.npy")).astype(np.int64)
    R, offsets = len(meta["edge_types"]), np.asarray(meta["node_type_offset"])
    if variant != "dgl210":  # homogenized: edge id = its type's first id + its rank among that type's edges
        counts = np.bincount(types, minlength=R)
        etype_offset = np.concatenate([[0], np.cumsum(counts)])
        order = np.argsort(types, kind="stable")
        eids = np.empty(len(types), dtype=np.int64)
        eids[order] = np.arange(len(types))
        g = dgl.graph(("csc", (torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(eids))),
                      num_nodes=len(indptr) - 1)
        g = g.formats("csc")
        g.create_formats_()
        offset_list = [int(o) for o in etype_offset]

        def sample_blocks(seeds, fanouts):
            total, s = 0, seeds
            for f in reversed(fanouts):
                frontier = dgl.sampling.sample_etype_neighbors(
                    g, s, offset_list, torch.full((R,), f, dtype=torch.int64), etype_sorted=True,
                    copy_ndata=False, copy_edata=False)
                blk = dgl.to_block(frontier, s)
                s = blk.srcdata[dgl.NID]
                total += blk.num_edges()
            return total

        return sample_blocks, torch.int64
    # the heterograph: one CSC per relation, local ids per node type
    ntypes = meta["node_types"]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    data = {}
    for r, (s, rel, d) in enumerate(meta["edge_types"]):
        mine = types == r
        src_local = indices[mine] - offsets[ntypes.index(s)]
        dst_local = dst[mine] - offsets[ntypes.index(d)]
        data[(s, rel, d)] = (torch.from_numpy(src_local), torch.from_numpy(dst_local))
    g = dgl.heterograph(data, num_nodes_dict={t: int(offsets[i + 1] - offsets[i]) for i, t in enumerate(ntypes)})
    g = g.formats("csc")
    g.create_formats_()
    target, base = meta["target_type"], int(offsets[ntypes.index(meta["target_type"])])
    mapping = {}

    def sample_blocks(seeds, fanouts):
        total, s = 0, {target: seeds - base}
        for f in reversed(fanouts):
            blk = dgl.sampling.sample_neighbors_fused(g, s, f, mapping=mapping)
            s = {t: v for t, v in blk.srcdata[dgl.NID].items() if len(v)}
            total += blk.num_edges()
        return total

    return sample_blocks, torch.int64


def main() -> None:
    job = json.load(open(sys.argv[1]))
    if job.get("typed"):
        sample_blocks, idtype = typed_sampler(job, job["variant"])
        return run(job, lambda s, f: sample_blocks(s, f), idtype)
    indptr = torch.from_numpy(np.load(os.path.join(job["graph"], "indptr.npy")).astype(np.int64))
    indices = torch.from_numpy(np.load(os.path.join(job["graph"], "indices.npy")))
    idtype = torch.int32 if job["variant"] == "dgl113" and indices.dtype == torch.int32 else torch.int64
    g = dgl.graph(("csc", (indptr.to(idtype), indices.to(idtype), torch.tensor([], dtype=idtype))),
                  num_nodes=len(indptr) - 1, idtype=idtype)
    g = g.formats("csc")
    g.create_formats_()
    fused = job["variant"] == "dgl210"
    mapping = {}

    def sample_blocks(seeds, fanouts):
        blocks, s = [], seeds
        for f in reversed(fanouts):
            if fused:
                blk = dgl.sampling.sample_neighbors_fused(g, s, f, mapping=mapping)
            else:
                blk = dgl.to_block(dgl.sampling.sample_neighbors(g, s, f), s)
            s = blk.srcdata[dgl.NID]
            blocks.insert(0, blk)
        return sum(b.num_edges() for b in blocks)

    run(job, sample_blocks, idtype)


def run(job, sample_blocks, idtype) -> None:
    """Time sample_blocks(seeds, fanouts) on the job's batches; one JSON record per setting."""
    batches = np.load(job["batches"])
    meta = {"dgl": dgl.__version__, "torch": torch.__version__, "idtype": str(idtype)}
    for threads in job["threads"]:
        torch.set_num_threads(threads)
        for fanouts in job["fanouts"]:
            for bs in job["batch_sizes"]:
                seeds = [torch.from_numpy(b[:bs].astype(np.int32 if idtype == torch.int32 else np.int64))
                         for b in batches[str(bs)]]
                times, edges = time_batches(lambda i, s: sample_blocks(s, fanouts), seeds,
                                            job["min_reps"], job["min_seconds"])
                ms = median_ms(times)
                print(json.dumps({"kernel": job["variant"], "batch_size": bs, "fanouts": fanouts,
                                  "threads": threads, "median_ms": ms, "reps": len(times),
                                  "edges": float(np.mean(edges)),
                                  "edges_per_s": float(np.mean(edges)) / (ms / 1e3), **meta}),
                      flush=True)


if __name__ == "__main__":
    main()
