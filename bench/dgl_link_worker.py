"""Times DGL 1.1.3's edge-prediction sampler on the graph and batches bench/link_sampling.py
gives it: dgl.dataloading.as_edge_prediction_sampler(NeighborSampler(fanouts),
exclude=..., negative_sampler=Uniform(k)).sample(g, eids) per batch of positive edge ids.
A typed job ("typed" in the JSON) gives a heterograph: per canonical edge type its (src,
dst) per-type node ids in edge id order, the split relation (its batches' edge ids) and
its reverse relation (edge i of it is edge i of the relation reversed: reverse_types).

Runs under a Python that has DGL (bench/README.md); reads a job JSON, prints one JSON record.
Keep this file free of fastsample imports."""

import json
import os
import sys
import time

from dgl_import import import_dgl

dgl = import_dgl()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from timing import median_ms, time_batches  # noqa: E402


def main() -> None:
    job = json.load(open(sys.argv[1]))
    torch.set_num_threads(job["threads"])
    typed = job.get("typed")
    reverse = reverse_etypes = None
    if typed:
        etypes = [tuple(t) for t in typed["edge_types"]]
        data = {t: (torch.from_numpy(np.load(s)), torch.from_numpy(np.load(d))) for t, (s, d) in zip(etypes, typed["edges"])}
        g = dgl.heterograph(data, num_nodes_dict=typed["num_nodes"])
        rel = etypes[typed["relation"]]
        if typed["reverse"] is not None:
            rev = etypes[typed["reverse"]]
            reverse_etypes = {rel: rev, rev: rel}
        batches = [{rel: torch.from_numpy(b)} for b in np.load(job["batches"])]
    else:
        indptr = torch.from_numpy(np.load(job["indptr"]).astype(np.int64))
        indices = torch.from_numpy(np.load(job["indices"]).astype(np.int64))
        # edge id = the edge's CSC position, so the batches' ids are fastsample's positions
        g = dgl.graph(("csc", (indptr, indices, torch.arange(len(indices)))), num_nodes=len(indptr) - 1)
        reverse = torch.from_numpy(np.load(job["reverse"])) if job["exclude"] == "reverse_id" else None
        batches = [torch.from_numpy(b) for b in np.load(job["batches"])]
    # every format: the edge-prediction sampler takes the pairs' subgraph from COO, samples from CSC
    g.create_formats_()
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(job["fanouts"]), exclude=job["exclude"], reverse_eids=reverse,
        reverse_etypes=reverse_etypes, negative_sampler=dgl.dataloading.negative_sampler.Uniform(job["negatives"]))

    def run(i, eids):
        c0 = time.process_time()
        _, _, _, blocks = sampler.sample(g, eids)
        return sum(b.num_edges() for b in blocks), time.process_time() - c0

    times, out = time_batches(run, batches, min_reps=job["reps"], min_seconds=job["min_seconds"])
    print(json.dumps({"kernel": "dgl113", "ms": median_ms(times), "cpu_ms": median_ms([c for _, c in out]),
                      "sampled_edges": float(np.mean([e for e, _ in out])), "batches": len(times),
                      "dgl": dgl.__version__}), flush=True)


if __name__ == "__main__":
    main()
