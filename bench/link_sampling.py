"""Link-prediction sampling throughput: fastsample's EdgeLoader sampling (negatives, the
unique endpoints, their MFGs with the batch's edges excluded while picking) against DGL
1.1.3's edge-prediction sampler (NeighborSampler + as_edge_prediction_sampler, the same
exclusion, uniform negatives) on the same graph and the same positive edges, same run,
one thread each. Feature gathering is left out of both.

    python bench/link_sampling.py --dataset data/medium-link --dgl113-python bench/out/dgl-envs/dgl113/bin/python

DATASET is a link-split dataset (python -m fastsample.data link-split). Exclusion: on an
undirected split, each batch's edges and their reverses (fastsample "reverse", DGL
"reverse_id" with the reverse-edge map); else the edges alone ("self" for both).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from fastsample.loader import EdgeLoader
from fastsample.edge_splits import edge_keys
from fastsample.graph import load_dataset
from fastsample.sampling import edge_positions, set_num_threads
from timing import median_ms, time_batches

HERE = Path(__file__).resolve().parent


def cpu_model() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def reverse_positions(graph) -> np.ndarray:
    """For each CSC position (u -> v), the position of (v -> u) (the graph is symmetric)."""
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    src = np.asarray(graph.indices, dtype=np.int64)
    order = np.argsort(edge_keys(src, dst, n), kind="stable")
    rev = order[np.searchsorted(edge_keys(src, dst, n)[order], edge_keys(dst, src, n))]
    return rev.astype(np.int64)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000, help="positive edges per batch")
    p.add_argument("--negatives", type=int, default=1)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dgl113-python", help="python with DGL 1.1.3 (else that baseline is skipped)")
    p.add_argument("--json", help="write the records here")
    args = p.parse_args()
    fanouts = [int(f) for f in args.fanouts.split(",")]
    set_num_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    ds = load_dataset(args.dataset)
    loader = EdgeLoader(args.dataset, fanouts, args.batch_size, negatives=args.negatives, seed=0)
    rng = np.random.default_rng(0)
    batches = [loader.edges[rng.choice(len(loader.edges), args.batch_size, replace=False)]
               for _ in range(args.batches)]
    settings = (f"{ds.name}: {ds.num_nodes:,} nodes, {ds.graph.num_edges:,} edges; {len(loader.edges):,} training "
                f"edges; fanouts {fanouts}, {args.batch_size} positive edges per batch, {args.negatives} negatives "
                f"each, exclude {loader.exclude}; {args.threads} thread(s); {cpu_model()}")
    print(settings, flush=True)
    records = []
    def sample(i, edges):  # the sampling half of a batch: negatives, unique endpoints, MFGs with the exclusion
        seeds = loader.source.of(edges, loader.seed, 0, i)
        return sum(m.num_edges for m in loader.sample(seeds.nodes, i, exclude=seeds.exclude))

    times, sampled = time_batches(sample, batches)
    records.append({"kernel": "fastsample", "ms": median_ms(times), "sampled_edges": float(np.mean(sampled))})
    if args.dgl113_python:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            eids = np.stack([edge_positions(ds.graph, e[:, 0], e[:, 1])[:args.batch_size] for e in batches])
            np.save(tmp / "batches.npy", eids)
            exclude = "reverse_id" if loader.exclude == "reverse" else "self"
            if exclude == "reverse_id":
                np.save(tmp / "reverse.npy", reverse_positions(ds.graph))
            data = Path(os.path.abspath(args.dataset))  # the worker runs in bench/
            job = {"indptr": str(data / "indptr.npy"), "indices": str(data / "indices.npy"),
                   "reverse": str(tmp / "reverse.npy"), "batches": str(tmp / "batches.npy"), "fanouts": fanouts,
                   "negatives": args.negatives, "exclude": exclude, "threads": args.threads, "reps": 5,
                   "min_seconds": 1.0}
            (tmp / "job.json").write_text(json.dumps(job))
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
            out = subprocess.run([os.path.abspath(args.dgl113_python), str(HERE / "dgl_link_worker.py"), str(tmp / "job.json")],
                                 capture_output=True, text=True, cwd=HERE, env=env)
            if out.returncode != 0:
                raise SystemExit(f"DGL worker failed:\n{out.stderr}")
            records.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = records[0]["ms"]
    for r in records:
        r["speedup_of_fastsample"] = r["ms"] / base
        print(f"  {r['kernel']:<11} {r['ms']:8.2f} ms/batch  {r['sampled_edges']:12,.0f} sampled edges/batch  "
              f"fastsample is {r['ms'] / base:.2f}x faster", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": settings, "records": records}, indent=2))


if __name__ == "__main__":
    main()
