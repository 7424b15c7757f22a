"""Times DGL's samplers on the graph and batches bench/sampling.py gives it.

Runs under a Python that has DGL (see bench/README.md); reads a job JSON, prints one
JSON record per line. Variants:
  dgl113: dgl.sampling.sample_neighbors + dgl.to_block per layer (DGL 1.x's path)
  dgl210: dgl.sampling.sample_neighbors_fused per layer with a reused `mapping`
Graph ids are int32 for dgl113 (its fastest correct setting) and int64 for dgl210: DGL
2.1.0's fused sampler returns wrong, shrinking blocks on int32 graphs once the mapping
is reused (seen here), and bench/sampling.py flags such results.
"""

import json
import os
import sys

from dgl_import import import_dgl

dgl = import_dgl()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from timing import median_ms, time_batches  # noqa: E402


def main() -> None:
    job = json.load(open(sys.argv[1]))
    indptr = torch.from_numpy(np.load(os.path.join(job["graph"], "indptr.npy")).astype(np.int64))
    indices = torch.from_numpy(np.load(os.path.join(job["graph"], "indices.npy")))
    idtype = torch.int32 if job["variant"] == "dgl113" and indices.dtype == torch.int32 else torch.int64
    g = dgl.graph(("csc", (indptr.to(idtype), indices.to(idtype), torch.tensor([], dtype=idtype))),
                  num_nodes=len(indptr) - 1, idtype=idtype)
    g = g.formats("csc")
    g.create_formats_()
    batches = np.load(job["batches"])
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
