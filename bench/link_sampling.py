"""Link-prediction sampling throughput: fastsample's EdgeLoader sampling (negatives, the
unique endpoints, their MFGs with the batch's edges excluded while picking) against DGL
1.1.3's edge-prediction sampler (NeighborSampler + as_edge_prediction_sampler, the same
exclusion, uniform negatives) on the same graph and the same positive edges, same run,
one thread each. Feature gathering is left out of both.

    python bench/link_sampling.py --dataset data/medium-link --dgl113-python bench/out/dgl-envs/dgl113/bin/python

DATASET is a link-split dataset (python -m fastsample.data link-split). Exclusion: on an
undirected split, each batch's edges and their reverses (fastsample "reverse", DGL
"reverse_id" with the reverse-edge map); else the edges alone ("self" for both).

A typed split (link-split --relation SRC,REL,DST) runs against the same heterograph in
DGL: one canonical edge type per relation, each type's nodes numbered from 0 (global id
minus node_type_offset), the positives given as edge ids of the split relation, and the
reverse relation's edges stored in the order of the relation's (edge i of the reverse is
edge i reversed), so that DGL's exclude="reverse_types" drops the batch's edges and their
reverse-relation copies, as fastsample's "reverse" does. An int fanout is per edge type on
both sides. Times are wall-clock medians; "cpu" is the process's CPU time per batch (the
same figure on an idle machine with one thread, steadier on a busy one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from fastsample.loading import EdgeLoader
from fastsample.data.edge_splits import edge_keys
from fastsample.data.graph import load_dataset
from fastsample.sampling import edge_positions, set_num_threads
from timing import cpu_model, median_ms, time_batches

HERE = Path(__file__).resolve().parent


def reverse_positions(graph) -> np.ndarray:
    """For each CSC position (u -> v), the position of (v -> u) (the graph is symmetric)."""
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    src = np.asarray(graph.indices, dtype=np.int64)
    order = np.argsort(edge_keys(src, dst, n), kind="stable")
    rev = order[np.searchsorted(edge_keys(src, dst, n)[order], edge_keys(dst, src, n))]
    return rev.astype(np.int64)


def typed_edges(graph, relation: int, reverse: int | None):
    """The heterograph DGL gets, from a typed CSC: per edge type r, (src, dst) per-type node
    ids in DGL's edge id order, and positions[r], the CSC position of each of r's edges.
    Edge type r's edges are in CSC order, except the reverse relation's: edge i of
    ``reverse`` is edge i of ``relation`` reversed (DGL's reverse_types excludes the same ids)."""
    n = graph.num_nodes
    off = np.asarray(graph.node_type_offset, dtype=np.int64)
    node_type = {name: t for t, name in enumerate(graph.node_types)}
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(graph.indptr, dtype=np.int64)))
    src = np.asarray(graph.indices, dtype=np.int64)
    types = np.asarray(graph.type_per_edge)
    positions = [np.flatnonzero(types == r) for r in range(len(graph.edge_types))]
    if reverse == relation:
        raise SystemExit("typed link split whose relation is its own reverse: not supported here")
    if reverse is not None:
        fwd, rev = positions[relation], positions[reverse]
        keys = edge_keys(src[rev], dst[rev], n)
        order = np.argsort(keys, kind="stable")
        want = edge_keys(dst[fwd], src[fwd], n)  # each forward edge, reversed
        at = np.minimum(np.searchsorted(keys[order], want), len(order) - 1)
        match = order[at]
        if len(fwd) != len(rev) or not np.array_equal(keys[match], want) or len(np.unique(match)) != len(match):
            raise SystemExit("typed link split: the reverse relation's edges are not one reverse per forward edge; "
                             "DGL's reverse_types cannot exclude the same edges")
        positions[reverse] = rev[match]
    edges = []
    for r, (s, _, d) in enumerate(graph.edge_types):
        pos = positions[r]
        edges.append((src[pos] - off[node_type[s]], dst[pos] - off[node_type[d]]))
    return edges, positions


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000, help="positive edges per batch")
    p.add_argument("--negatives", type=int, default=1)
    p.add_argument("--batches", type=int, default=30, help="batches, the first untimed (a warm-up)")
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
    g = ds.graph
    typed = g.typed
    relation = loader.source.relation
    reverse = loader.source.reverse if loader.exclude == "reverse" else None
    kind = ""
    if typed:
        rel = ":".join(g.edge_types[relation])
        rev = f", reverse {':'.join(g.edge_types[reverse])}" if reverse is not None else ""
        kind = (f"typed: {len(g.node_types)} node types, {len(g.edge_types)} edge types; relation {rel}{rev}; "
                f"negatives uniform over {g.edge_types[relation][2]}; ")
    settings = (f"{ds.name}: {ds.num_nodes:,} nodes, {ds.graph.num_edges:,} edges; {kind}{len(loader.edges):,} training "
                f"edges; fanouts {fanouts}{' per edge type' if typed else ''}, {args.batch_size} positive edges per "
                f"batch, {args.negatives} negatives each, exclude {loader.exclude}; {args.threads} thread(s); {cpu_model()}")
    print(settings, flush=True)
    records = []
    def sample(i, edges):  # the sampling half of a batch: negatives, unique endpoints, MFGs with the exclusion
        c0 = time.process_time()
        seeds = loader.source.of(edges, loader.seed, 0, i)
        n = sum(m.num_edges for m in loader.sample(seeds.nodes, i, exclude=seeds.exclude))
        return n, time.process_time() - c0

    times, out = time_batches(sample, batches, min_reps=len(batches))  # every batch but the warm-up, both sides
    records.append({"kernel": "fastsample", "ms": median_ms(times), "cpu_ms": median_ms([c for _, c in out]),
                    "sampled_edges": float(np.mean([e for e, _ in out])), "batches": len(times)})
    if args.dgl113_python:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            job = {"batches": str(tmp / "batches.npy"), "fanouts": fanouts, "negatives": args.negatives,
                   "threads": args.threads, "reps": len(batches), "min_seconds": 0.0}
            if typed:
                edges, positions = typed_edges(g, relation, reverse)
                eids = []
                for e in batches:  # CSC positions of the batch's edges of the relation -> the relation's edge ids
                    pos = edge_positions(g, e[:, 0], e[:, 1], np.full(len(e), relation))
                    assert len(pos) == args.batch_size, "a batch's edges must be distinct edges of the relation"
                    eids.append(np.searchsorted(positions[relation], pos))
                np.save(tmp / "batches.npy", np.stack(eids))
                for r, (s, d) in enumerate(edges):
                    np.save(tmp / f"src{r}.npy", s)
                    np.save(tmp / f"dst{r}.npy", d)
                off = np.asarray(g.node_type_offset, dtype=np.int64)
                job["typed"] = {"num_nodes": {t: int(off[i + 1] - off[i]) for i, t in enumerate(g.node_types)},
                                "edge_types": [list(t) for t in g.edge_types],
                                "edges": [[str(tmp / f"src{r}.npy"), str(tmp / f"dst{r}.npy")] for r in range(len(edges))],
                                "relation": relation, "reverse": reverse}
                job["exclude"] = {"reverse": "reverse_types", "self": "self", "none": None}[loader.exclude]
            else:
                eids = np.stack([edge_positions(g, e[:, 0], e[:, 1])[:args.batch_size] for e in batches])
                np.save(tmp / "batches.npy", eids)
                exclude = {"reverse": "reverse_id", "self": "self", "none": None}[loader.exclude]
                if exclude == "reverse_id":
                    np.save(tmp / "reverse.npy", reverse_positions(g))
                data = Path(os.path.abspath(args.dataset))  # the worker runs in bench/
                job.update({"indptr": str(data / "indptr.npy"), "indices": str(data / "indices.npy"),
                            "reverse": str(tmp / "reverse.npy"), "exclude": exclude})
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
        r["cpu_speedup_of_fastsample"] = r["cpu_ms"] / records[0]["cpu_ms"]
        print(f"  {r['kernel']:<11} {r['ms']:8.2f} ms/batch (cpu {r['cpu_ms']:8.2f} ms)  {r['sampled_edges']:12,.0f} "
              f"sampled edges/batch  fastsample is {r['ms'] / base:.2f}x faster ({r['cpu_speedup_of_fastsample']:.2f}x "
              f"in cpu time; {r['batches']} timed batches)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": settings, "records": records}, indent=2))


if __name__ == "__main__":
    main()
