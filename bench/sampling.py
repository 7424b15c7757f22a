"""Sampling microbenchmark: fastsample's kernels against DGL on the same graph and batches.

Every kernel samples the same mini-batches (random training nodes, fixed by --seed) for
each batch size, fanout set and thread count; the table reports the median time per
mini-batch, sampled edges per second, and native's speed-up over each other kernel.
DGL runs in its own Python (--dgl113-python, --dgl210-python; see bench/README.md):

  dgl113   DGL 1.1.3: dgl.sampling.sample_neighbors + dgl.to_block per layer
  dgl210   DGL 2.1.0: dgl.sampling.sample_neighbors_fused per layer, reused mapping
On a typed dataset (python -m fastsample.data synth --preset hetero-medium) every fanout
applies to each edge type, and the baselines are DGL's typed paths:
  dgl113        DGL 1.1.3: dgl.sampling.sample_etype_neighbors (homogenized graph, edges
                sorted by type, as DistDGL samples) + dgl.to_block per layer
  dgl210        DGL 2.1.0: sample_neighbors_fused on the heterograph, reused mapping
  dgl210-etype  DGL 2.1.0: sample_etype_neighbors + to_block, as dgl113

    python bench/sampling.py --dataset data/products \\
        --dgl113-python /path/dgl113/bin/python --dgl210-python /path/dgl210/bin/python

--scaling instead times native on a 1M- and a 16M-node graph of equal average degree
(sampling must cost O(output), not O(|V|)); --gather-limit measures the machine's random
4-byte gather rate from a 600 MB array, the bound on any sampler here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from fastsample.data.graph import load_dataset
from fastsample.native import lib as native_lib
from fastsample.sampling import sample, set_num_threads
from timing import median_ms, time_batches

HERE = Path(__file__).resolve().parent
FANOUTS = [(15, 10, 5), (5, 10, 15), (10, 10, 10), (20, 15, 10)]
BATCH_SIZES = [1024, 2048, 4096, 8192, 10240]


def parse_fanouts(text: str):
    return [tuple(int(x) for x in f.split(",")) for f in text.split(";")]


def make_batches(train: np.ndarray, batch_sizes, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {bs: np.stack([rng.choice(train, bs, replace=False) for _ in range(reps)])
            for bs in batch_sizes}


def run_fastsample(graph, batches, args) -> list[dict]:
    kernels = [k for k in args.kernels if k != "native" or (native_lib is not None)]
    records = []
    for threads in args.threads:
        set_num_threads(threads)
        for fanouts in args.fanouts:
            for bs in args.batch_sizes:
                for kernel in kernels:
                    def run(i, seeds):
                                        return sum(m.num_edges for m in sample(graph, seeds, fanouts, step=i, kernel=kernel))

                    times, edges = time_batches(run, batches[bs], args.min_reps, args.min_seconds)
                    ms = median_ms(times)
                    rec = {"kernel": kernel, "batch_size": bs, "fanouts": list(fanouts), "threads": threads,
                           "median_ms": ms, "reps": len(times), "edges": float(np.mean(edges)),
                           "edges_per_s": float(np.mean(edges)) / (ms / 1e3)}
                    records.append(rec)
                    print(f"  {kernel:8s} t={threads} fanouts={fanouts} bs={bs}: {ms:8.2f} ms", flush=True)
    return records


def run_dgl(variant: str, python: str, graph_dir: str, batches, args, typed: bool = False) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "batches.npz"), **{str(k): v for k, v in batches.items()})
        job = {"variant": variant, "graph": graph_dir, "batches": os.path.join(tmp, "batches.npz"), "typed": typed,
               "threads": args.threads, "fanouts": [list(f) for f in args.fanouts],
               "batch_sizes": args.batch_sizes, "min_reps": args.min_reps,
               "min_seconds": args.min_seconds}
        with open(os.path.join(tmp, "job.json"), "w") as f:
            json.dump(job, f)
        proc = subprocess.Popen([python, str(HERE / "dgl_sampling_worker.py"), os.path.join(tmp, "job.json")],
                                stdout=subprocess.PIPE, text=True, cwd=HERE)
        records = []
        for line in proc.stdout:
            rec = json.loads(line)
            records.append(rec)
            print(f"  {variant:8s} t={rec['threads']} fanouts={tuple(rec['fanouts'])} "
                  f"bs={rec['batch_size']}: {rec['median_ms']:8.2f} ms", flush=True)
        if proc.wait() != 0:
            print(f"  {variant}: worker failed (exit {proc.returncode}); its results are incomplete")
    return records


def flag_mismatches(records) -> None:
    """Mark a record whose mean sampled edges differ from native's by over 2%: a kernel
    that samples less is not faster, it is wrong."""
    ref = {(r["threads"], tuple(r["fanouts"]), r["batch_size"]): r["edges"]
           for r in records if r["kernel"] == "native"}
    for r in records:
        want = ref.get((r["threads"], tuple(r["fanouts"]), r["batch_size"]))
        r["valid"] = want is None or abs(r["edges"] - want) <= 0.02 * want
        if not r["valid"]:
            print(f"  WARNING: {r['kernel']} t={r['threads']} fanouts={tuple(r['fanouts'])} "
                  f"bs={r['batch_size']} sampled {r['edges']:,.0f} edges vs native's {want:,.0f}: "
                  "excluded from the speed-ups")


def speedup_table(records) -> str:
    by = {(r["kernel"], r["threads"], tuple(r["fanouts"]), r["batch_size"]): r
          for r in records if r.get("valid", True)}
    others = [k for k in ("numba", "twostep", "dgl113", "dgl210", "dgl210-etype")
              if any(r["kernel"] == k for r in records)]
    head = f"{'threads':>7} {'fanouts':>12} {'batch':>6} {'native ms':>10} {'edges/s':>9} " + \
        " ".join(f"{'vs ' + k:>11}" for k in others)
    lines = [head, "-" * len(head)]
    for (kernel, threads, fanouts, bs), r in sorted(by.items(), key=lambda kv: kv[0][1:]):
        if kernel != "native":
            continue
        cells = []
        for k in others:
            o = by.get((k, threads, fanouts, bs))
            cells.append(f"{o['median_ms'] / r['median_ms']:>10.2f}x" if o else f"{'-':>11}")
        lines.append(f"{threads:>7} {','.join(map(str, fanouts)):>12} {bs:>6} {r['median_ms']:>10.2f} "
                     f"{r['edges_per_s'] / 1e6:>8.1f}M " + " ".join(cells))
    return "\n".join(lines)


def plot(records, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {(r["kernel"], r["threads"], tuple(r["fanouts"]), r["batch_size"]): r
          for r in records if r.get("valid", True)}
    fanouts = sorted({tuple(r["fanouts"]) for r in records}, key=lambda f: FANOUTS.index(f) if f in FANOUTS else 99)
    baselines = [k for k in ("dgl113", "dgl210", "dgl210-etype", "twostep") if any(r["kernel"] == k for r in records)]
    fig, axes = plt.subplots(1, len(fanouts), figsize=(4 * len(fanouts), 3.6), sharey=True, squeeze=False)
    for ax, f in zip(axes[0], fanouts):
        for base in baselines:
            for threads, style in zip(sorted({r["threads"] for r in records}), ("-o", "--s")):
                xs, ys = [], []
                for bs in sorted({r["batch_size"] for r in records}):
                    a, b = by.get(("native", threads, f, bs)), by.get((base, threads, f, bs))
                    if a and b:
                        xs.append(bs)
                        ys.append(b["median_ms"] / a["median_ms"])
                if xs:
                    ax.plot(xs, ys, style, label=f"vs {base}, {threads} thr")
        ax.axhline(1, color="grey", lw=0.8)
        ax.set_title(f"fanouts {','.join(map(str, f))}")
        ax.set_xlabel("batch size")
    axes[0][0].set_ylabel("speed-up of native")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("fastsample fused sampling: speed-up per batch size and fanout")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@numba.njit(nogil=True, cache=True)
def _gather(a, idx):
    s = 0
    for i in range(len(idx)):
        s += a[idx[i]]
    return s


def gather_limit(megabytes=600, n=20_000_000) -> float:
    """Random 4-byte gathers per second, one thread, from a `megabytes` array."""
    a = np.ones(megabytes * 2**20 // 4, dtype=np.int32)
    idx = np.random.default_rng(0).integers(0, len(a), n)
    _gather(a, idx[:1000])
    t0 = time.perf_counter()
    _gather(a, idx)
    return n / (time.perf_counter() - t0)


def scaling(args) -> dict:
    """Per-batch time on a 1M- and a 16M-node graph of the same average degree.

    Work per batch is O(output) (no per-call allocation or reset proportional to |V|), but
    time also depends on where the topology lives: next to each time, the random-read
    cost of an array as large as that graph's topology shows the memory hierarchy's part.
    """
    from fastsample.data.synth import SynthConfig, write_synthetic

    out = {}
    set_num_threads(1)
    for n in (1_000_000, 16_000_000):
        path = Path(args.graph_cache) / f"scaling-{n}"
        if not (path / "meta.json").exists():
            print(f"generating {n:,}-node graph (avg degree {args.scaling_degree}) into {path}", flush=True)
            write_synthetic(path, SynthConfig(num_nodes=n, avg_degree=args.scaling_degree, num_classes=16,
                                              feature_dim=4, seed=1), overwrite=True)
        ds = load_dataset(path, mmap=args.topology == "mmap")
        batches = make_batches(np.asarray(ds.train), [1024], 40, args.seed)[1024]

        def run(i, seeds):
            return sum(m.num_edges for m in sample(ds.graph, seeds, (15, 10, 5), step=i, kernel="native"))

        times, edges = time_batches(run, batches, 20, 2.0)
        ms = median_ms(times)
        topo_mb = (ds.graph.indptr.nbytes + ds.graph.indices.nbytes) // 2**20
        rate = gather_limit(max(topo_mb, 1))
        out[n] = {"nodes": n, "edges": ds.graph.num_edges, "median_ms": ms,
                  "sampled_edges": float(np.mean(edges)), "ns_per_sampled_edge": ms * 1e6 / np.mean(edges),
                  "topology_mb": topo_mb, "gather_ns_at_topology_size": 1e9 / rate}
        r = out[n]
        print(f"  {n:>11,} nodes, {ds.graph.num_edges:,} edges: {ms:.2f} ms per batch, "
              f"{r['sampled_edges']:,.0f} sampled edges ({r['ns_per_sampled_edge']:.1f} ns each); "
              f"random read from {topo_mb} MB: {r['gather_ns_at_topology_size']:.1f} ns", flush=True)
        del ds
    a, b = out[1_000_000], out[16_000_000]
    ratio = b["median_ms"] / a["median_ms"]
    print(f"16M / 1M: per-batch time {ratio:.2f}x, sampled edges {b['sampled_edges'] / a['sampled_edges']:.2f}x, "
          f"time per sampled edge {b['ns_per_sampled_edge'] / a['ns_per_sampled_edge']:.2f}x, random-read cost "
          f"{b['gather_ns_at_topology_size'] / a['gather_ns_at_topology_size']:.2f}x "
          f"(native, 1 thread, batch 1024, fanouts 15,10,5, topology {args.topology})")
    return {"scaling": list(out.values()), "ratio": ratio}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", help="dataset directory (default: generate --nodes into --graph-cache)")
    p.add_argument("--nodes", type=int, default=2_400_000, help="nodes of the generated graph")
    p.add_argument("--graph-cache", default=str(HERE / "out" / "graphs"))
    p.add_argument("--topology", choices=["memory", "mmap"], default="memory",
                   help="load the topology into memory (numpy backs it with huge pages; as the DGL "
                   "worker loads it) or memory-map the files (shared between ranks, 4 KiB pages)")
    p.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=BATCH_SIZES)
    p.add_argument("--fanouts", type=parse_fanouts, default=FANOUTS, help='e.g. "15,10,5;10,10,10"')
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--kernels", type=lambda s: s.split(","), default=["native", "numba", "twostep"],
                   help="fastsample kernels to time (comma-separated)")
    p.add_argument("--min-reps", type=int, default=5)
    p.add_argument("--min-seconds", type=float, default=1.0)
    p.add_argument("--max-reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dgl113-python", help="python with DGL 1.1.3 (else that baseline is skipped)")
    p.add_argument("--dgl210-python", help="python with DGL 2.1.0 (else that baseline is skipped)")
    p.add_argument("--json", help="write all records as JSON")
    p.add_argument("--plot", default=str(HERE / "out" / "sampling.png"))
    p.add_argument("--scaling", action="store_true", help="the 1M vs 16M nodes O(output) check instead")
    p.add_argument("--scaling-degree", type=float, default=10)
    p.add_argument("--gather-limit", action="store_true", help="also measure random gathers/s")
    args = p.parse_args()
    Path(args.plot).parent.mkdir(parents=True, exist_ok=True)

    print(f"fastsample sampling benchmark | python {platform.python_version()} numpy {np.__version__} "
          f"numba {numba.__version__} | native {'built' if (native_lib is not None) else 'NOT built'} | "
          f"{os.cpu_count()} cpus")
    extra = {}
    if args.gather_limit:
        rate = gather_limit()
        extra["gathers_per_s"] = rate
        print(f"random 4-byte gathers from a 600 MB array, 1 thread: {rate / 1e6:.1f} M/s "
              f"({1e9 / rate:.1f} ns each)")
    if args.scaling:
        extra.update(scaling(args))
        if args.json:
            Path(args.json).write_text(json.dumps(extra, indent=2))
        return

    if args.dataset:
        path = Path(args.dataset)
    else:
        from fastsample.data.synth import PRESETS, write_synthetic
        from dataclasses import replace

        path = Path(args.graph_cache) / f"synth-{args.nodes}"
        if not (path / "meta.json").exists():
            write_synthetic(path, replace(PRESETS["products"], num_nodes=args.nodes), overwrite=True)
    ds = load_dataset(path, mmap=args.topology == "mmap")
    deg = ds.graph.in_degrees()
    if ds.typed:
        print(f"typed: {len(ds.graph.node_types)} node types, {ds.graph.num_edge_types} edge types, seeds of type "
              f"{ds.target_type}; each fanout applies to every edge type (per (node, edge type) segment)")
    print(f"graph {path}: {ds.graph.num_nodes:,} nodes, {ds.graph.num_edges:,} edges, mean in-degree "
          f"{deg.mean():.1f}, max {deg.max():,} | topology {args.topology} | batch sizes {args.batch_sizes} | fanouts "
          f"{[','.join(map(str, f)) for f in args.fanouts]} | threads {args.threads}")
    batches = make_batches(np.asarray(ds.train), args.batch_sizes, args.max_reps, args.seed)

    records = run_fastsample(ds.graph, batches, args)
    variants = [("dgl113", args.dgl113_python), ("dgl210", args.dgl210_python)]
    if ds.typed:  # DGL 2.1 has two typed paths; the table shows both
        variants.append(("dgl210-etype", args.dgl210_python))
    for variant, python in variants:
        if python:
            records += run_dgl(variant, python, str(path.resolve()), batches, args, typed=ds.typed)
        else:
            print(f"  {variant}: skipped (no --{variant}-python given)")
    flag_mismatches(records)
    print()
    print("median ms per mini-batch for native; other columns: their time / native's (higher = native faster)")
    print(speedup_table(records))
    if args.json:
        Path(args.json).write_text(json.dumps({"graph": str(path), "topology": args.topology,
                                               "nodes": ds.graph.num_nodes,
                                               "edges": ds.graph.num_edges, **extra,
                                               "records": records}, indent=2))
    plot(records, Path(args.plot))
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
