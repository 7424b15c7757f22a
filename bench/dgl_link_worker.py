"""Times DGL 1.1.3's edge-prediction sampler on the graph and batches bench/link_sampling.py
gives it: dgl.dataloading.as_edge_prediction_sampler(NeighborSampler(fanouts),
exclude=..., negative_sampler=Uniform(k)).sample(g, eids) per batch of positive edge ids.

Runs under a Python that has DGL (bench/README.md); reads a job JSON, prints one JSON record.
Keep this file free of fastsample imports."""

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
    torch.set_num_threads(job["threads"])
    indptr = torch.from_numpy(np.load(job["indptr"]).astype(np.int64))
    indices = torch.from_numpy(np.load(job["indices"]).astype(np.int64))
    n = len(indptr) - 1
    # edge id = the edge's CSC position, so the batches' ids are fastsample's positions
    # every format: the edge-prediction sampler takes the pairs' subgraph from COO, samples from CSC
    g = dgl.graph(("csc", (indptr, indices, torch.arange(len(indices)))), num_nodes=n)
    g.create_formats_()
    reverse = torch.from_numpy(np.load(job["reverse"])) if job["exclude"] == "reverse_id" else None
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(job["fanouts"]), exclude=job["exclude"], reverse_eids=reverse,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(job["negatives"]))
    batches = [torch.from_numpy(b) for b in np.load(job["batches"])]

    def run(i, eids):
        _, _, _, blocks = sampler.sample(g, eids)
        return sum(b.num_edges() for b in blocks)

    times, edges = time_batches(run, batches, min_reps=job["reps"], min_seconds=job["min_seconds"])
    print(json.dumps({"kernel": "dgl113", "ms": median_ms(times), "sampled_edges": float(np.mean(edges)),
                      "dgl": dgl.__version__}), flush=True)


if __name__ == "__main__":
    main()
