"""Model benchmark: GraphSAGE forward + backward (+ Adam step) per mini-batch, on CPU.

Samples --batches mini-batches (seeds from the training split, fastsample's native
sampler) from a power-law graph, takes their input features from the dataset, and times
each implementation on the same blocks with the same initial weights, each in its own
process (bench/model_worker.py):

  fastsample   fastsample.nn.sage.GraphSAGE, native aggregation, fp32 products on torch's BLAS
               (--matmul blas: what training ran before the engines were measured)
  fastsample-auto   the same with the products' engines measured and chosen (--matmul auto,
               the training default; fastsample/nn/matmul.py)
  fastsample-bf16   --precision bf16 as training runs it: bfloat16 features, bf16 products
               only where measured to pay
  fastsample-bf16-products   bfloat16 features and bf16 products, whether they pay or not
  reference    the same model in plain PyTorch (sparse CSR mean), the tests' reference
  dgl113       DGL 1.1.3's dgl.nn.SAGEConv('mean'), when --dgl113-python has DGL

for each --threads count and each --allocator:
  system       malloc's defaults (how DGL and PyTorch run out of the box)
  retain       freed memory kept mapped (GLIBC_TUNABLES; what `fastsample.train` sets
               for itself, see fastsample/allocator.py), applied to every impl alike

The losses of all impls are compared (same blocks, same weights: fp32 ones must agree to
1e-4, bf16 ones to 2e-2), and the ratios are per (threads, allocator) against today's
fastsample (blas) and against dgl113, plus fastsample as training runs it (auto, retain)
against DGL as shipped (system).

    python bench/model.py --dgl113-python /path/dgl113/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from fastsample.allocator import TUNABLES
from fastsample.data.graph import load_dataset
from fastsample.nn.matmul import cpu_summary
from fastsample.nn.sage import GraphSAGE
from fastsample.sampling import sample

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "out" / "graphs" / "medium"


def make_batches(args, path: str) -> dict:
    ds = load_dataset(args.data)
    rng = np.random.default_rng(args.seed)
    train = np.asarray(ds.train)
    arrays, sizes = {"num_batches": args.batches, "num_layers": len(args.fanouts)}, []
    for b in range(args.batches):
        seeds = np.sort(rng.choice(train, args.batch_size, replace=False))
        mfgs = sample(ds.graph, seeds, args.fanouts, seed=args.seed, step=b)
        for i, m in enumerate(mfgs):
            arrays.update({f"indptr{b}_{i}": m.indptr, f"indices{b}_{i}": m.indices, f"num_src{b}_{i}": m.num_src,
                           f"num_dst{b}_{i}": m.num_dst})
        arrays[f"x{b}"] = np.ascontiguousarray(ds.features[mfgs[0].src_ids], dtype=np.float32)
        arrays[f"y{b}"] = np.asarray(ds.labels[seeds], dtype=np.int64)
        sizes.append([(m.num_src, m.num_dst, m.num_edges) for m in mfgs])
    np.savez(path, **arrays)
    return {"num_nodes": ds.graph.num_nodes, "num_edges": ds.graph.num_edges, "feature_dim": ds.features.shape[1],
            "classes": ds.num_classes, "sizes": sizes}


def run(impl: str, python: str, threads: int, allocator: str, job: dict, tmp: str) -> dict | None:
    path = os.path.join(tmp, f"{impl}-{threads}-{allocator}.json")
    Path(path).write_text(json.dumps({**job, "impl": impl, "threads": threads}))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(HERE)}
    env.pop("GLIBC_TUNABLES", None)
    if allocator == "retain":
        env["GLIBC_TUNABLES"] = TUNABLES
    proc = subprocess.run([python, str(HERE / "model_worker.py"), path], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"  {impl} ({threads} threads, {allocator}) failed (exit {proc.returncode}):\n{proc.stderr[-1500:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DEFAULT_DATA),
                   help="dataset directory (default: the 'medium' preset, 500k nodes / ~10M edges, generated "
                   "into bench/out/graphs/medium if missing)")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--fanouts", default="15,10,5", help="per layer, input layer first")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batches", type=int, default=4, help="distinct mini-batches, cycled through")
    p.add_argument("--iterations", type=int, default=12, help="timed iterations per run (after --warmup)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--allocator", default="system,retain", help="system, retain, or both (see above)")
    p.add_argument("--impls", default="fastsample,fastsample-auto,fastsample-bf16,fastsample-bf16-products,reference,"
                   "dgl113")
    p.add_argument("--dgl113-python", help="a Python with DGL 1.1.3 (bench/README.md); without it dgl113 is skipped")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write settings and results here")
    args = p.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    allocators = args.allocator.split(",")
    impls = args.impls.split(",")
    if "dgl113" in impls and not args.dgl113_python:
        print("dgl113: skipped (no --dgl113-python given)")
        impls.remove("dgl113")
    if args.data == str(DEFAULT_DATA) and not (DEFAULT_DATA / "meta.json").exists():
        print(f"generating the medium preset graph into {DEFAULT_DATA} ...", flush=True)
        subprocess.run([sys.executable, "-m", "fastsample.data", "synth", "--preset", "medium", "--quiet",
                        str(DEFAULT_DATA)], check=True)

    with tempfile.TemporaryDirectory() as tmp:
        info = make_batches(args, os.path.join(tmp, "batches.npz"))
        torch.manual_seed(args.seed)
        model = GraphSAGE(info["feature_dim"], args.hidden, info["classes"], len(args.fanouts), dropout=0.0)
        torch.save(model.state_dict(), os.path.join(tmp, "weights.pt"))
        job = {"batches": os.path.join(tmp, "batches.npz"), "weights": os.path.join(tmp, "weights.pt"),
               "in_dim": info["feature_dim"], "hidden": args.hidden, "classes": info["classes"],
               "layers": len(args.fanouts), "lr": 0.003, "warmup": args.warmup, "iterations": args.iterations}
        mean_sizes = np.mean(np.array(info["sizes"]), axis=0).round().astype(int).tolist()
        print(f"graph {args.data}: {info['num_nodes']:,} nodes, {info['num_edges']:,} edges, {info['feature_dim']} "
              f"features, {info['classes']} classes | batch {args.batch_size}, fanouts {args.fanouts}, hidden "
              f"{args.hidden}, {len(args.fanouts)} layers, dropout 0, Adam | {args.batches} batches, "
              f"{args.warmup} warm-up + {args.iterations} timed iterations | {os.cpu_count()} cpus: {cpu_summary()}")
        print("MFG sizes per layer (input layer first; mean of the batches): "
              + ", ".join(f"{s:,} src -> {d:,} dst, {e:,} edges" for s, d, e in mean_sizes), flush=True)
        rows = []
        for allocator in allocators:
            for t in threads:
                for impl in impls:
                    python = args.dgl113_python if impl == "dgl113" else sys.executable
                    r = run(impl, python, t, allocator, job, tmp)
                    if r is None:
                        continue
                    row = {"impl": impl, "threads": t, "allocator": allocator,
                           "fwd_bwd_ms": statistics.median(r["fwd_bwd_s"]) * 1e3,
                           "fwd_bwd_min_ms": min(r["fwd_bwd_s"]) * 1e3,
                           "step_ms": statistics.median(r["step_s"]) * 1e3, "first_loss": r["losses"][0],
                           "last_loss": r["losses"][-1], "versions": {"torch": r["torch"], "dgl": r["dgl"]},
                           "plan": r.get("plan")}
                    rows.append(row)
                    print(f"  {impl:24s} {t} thr {allocator:6s} fwd+bwd {row['fwd_bwd_ms']:7.1f} ms "
                          f"(min {row['fwd_bwd_min_ms']:.1f}), Adam step {row['step_ms']:.1f} ms, loss "
                          f"{row['first_loss']:.6f} -> {row['last_loss']:.6f}"
                          + (f"\n  {'':24s} products: {row['plan']}" if row["plan"] else ""), flush=True)
    report(rows, args)


def report(rows: list[dict], args) -> None:
    if not rows:
        sys.exit("no implementation ran")
    agree = True
    for kind, tol in (("fp32", 1e-4), ("bf16", 2e-2)):
        losses = [r["first_loss"] for r in rows if ("bf16" in r["impl"]) == (kind == "bf16")]
        base = [r["first_loss"] for r in rows if "bf16" not in r["impl"]] or losses
        if losses:
            ok = max(abs(x - base[0]) for x in losses) <= tol * max(1.0, abs(base[0]))
            agree &= ok
            print(f"\nfirst-iteration losses, {kind} impls {'agree' if ok else 'DISAGREE'} (to {tol:g}): "
                  f"{min(losses):.6f} .. {max(losses):.6f}")

    def find(impl, t, allocator):
        return next((r for r in rows if (r["impl"], r["threads"], r["allocator"]) == (impl, t, allocator)), None)

    head = (f"{'impl':>24} {'threads':>7} {'allocator':>9} {'fwd+bwd ms':>10} {'+ step ms':>9} {'vs blas':>8} "
            f"{'vs dgl113':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        base, dgl = find("fastsample", r["threads"], r["allocator"]), find("dgl113", r["threads"], r["allocator"])
        r["speedup_vs_blas"] = base["fwd_bwd_ms"] / r["fwd_bwd_ms"] if base else None
        r["speedup_vs_dgl113"] = dgl["fwd_bwd_ms"] / r["fwd_bwd_ms"] if dgl else None
        ratios = [f"{r[k]:.2f}x" if r[k] else "-" for k in ("speedup_vs_blas", "speedup_vs_dgl113")]
        print(f"{r['impl']:>24} {r['threads']:>7} {r['allocator']:>9} {r['fwd_bwd_ms']:>10.1f} "
              f"{r['fwd_bwd_ms'] + r['step_ms']:>9.1f} {ratios[0]:>8} {ratios[1]:>9}")
    for t in sorted({r["threads"] for r in rows}):
        ours = find("fastsample-auto", t, "retain") or find("fastsample", t, "retain")
        dgl = find("dgl113", t, "system")
        if ours and dgl:
            print(f"{t} thread(s): fastsample as training runs it (retain) vs DGL as shipped (system): "
                  f"{dgl['fwd_bwd_ms'] / ours['fwd_bwd_ms']:.2f}x forward+backward")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"settings": vars(args), "losses_agree": agree, "rows": rows}, indent=2))
        print(f"json {args.json}")
    if not agree:
        sys.exit("the implementations disagree on the loss: the timings are not comparable")


if __name__ == "__main__":
    main()
