"""Exact layer-wise inference against sampled evaluation, on the same ranks and nodes.

    python bench/inference.py --partition data/medium-p2 [--reps 3] [--json bench/out/inference.json]

Each measurement is its own `mpiexec -n P` launch (so peak RSS is the phase's own), of
bench/inference_worker.py, with the same GraphSAGE (random weights from one seed: the
timing does not depend on them):
  full        fastsample.loading.layerwise.layerwise: every node's output with all neighbours
  sampled-all sampled evaluation (NodeLoader batches, --fanouts) of every node
  sampled-eval sampled evaluation of the val and test nodes only (what --eval sampled does)
Reported: the median time of --reps launches, per rank peak RSS (ru_maxrss: private
memory plus the shared topology pages the rank touched), the node count, and the ratio
full / sampled-all.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from fastsample.launcher import find_mpiexec


HERE = Path(__file__).resolve().parent
MODES = ("full", "sampled-all", "sampled-eval")


def run(args, mode: str) -> dict:
    ranks = json.loads((Path(args.partition) / "partition.json").read_text())["num_parts"]
    cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks), sys.executable, str(HERE / "inference_worker.py"), args.partition, mode,
           args.fanouts, str(args.batch_size), str(args.eval_batch_size), str(args.hidden), str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.exit(f"bench/inference.py: {mode} failed:\n{proc.stdout}{proc.stderr}")
    (rows,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    return {"seconds": max(r["seconds"] for r in rows), "nodes": sum(r["nodes"] for r in rows),
            "peak_rss_mib": [r["peak_rss_mib"] for r in sorted(rows, key=lambda r: r["rank"])], "ranks": ranks}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partition", required=True, help="partition directory (hybrid), for P ranks")
    p.add_argument("--fanouts", default="15,10,5", help="sampled evaluation's fanouts; also sets the layers")
    p.add_argument("--batch-size", type=int, default=1000, help="seeds per rank per step of sampled evaluation")
    p.add_argument("--eval-batch-size", type=int, default=4096, help="nodes per rank per batch of full inference")
    p.add_argument("--hidden", type=int, default=256, help="GraphSAGE hidden width")
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--reps", type=int, default=3, help="launches per mode (median reported)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds before one launch is stopped")
    p.add_argument("--json", default=str(HERE / "out" / "inference.json"), help="where to write the results")
    args = p.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    results = {}
    for mode in MODES:
        runs = [run(args, mode) for _ in range(args.reps)]
        results[mode] = {**runs[0], "seconds": statistics.median(r["seconds"] for r in runs),
                         "runs_s": [r["seconds"] for r in runs],
                         "peak_rss_mib": [max(r["peak_rss_mib"][k] for r in runs) for k in range(runs[0]["ranks"])]}
    meta = json.loads((Path(args.partition) / "partition.json").read_text())["dataset"]
    print(f"{meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges']:,} edges, {meta['feature_dim']} features; "
          f"{results['full']['ranks']} ranks x {args.threads} threads; GraphSAGE {len(args.fanouts.split(','))} "
          f"layers, hidden {args.hidden}; sampled fanouts {args.fanouts}, batch {args.batch_size}/rank; full "
          f"batch {args.eval_batch_size}/rank; median of {args.reps}; CPU {cpu}, {os.cpu_count()} cpus")
    print(f"{'mode':>13} {'nodes':>10} {'time s':>8} {'peak RSS MiB per rank':>24}")
    for mode, r in results.items():
        print(f"{mode:>13} {r['nodes']:>10,} {r['seconds']:>8.2f} {', '.join(f'{m:,.0f}' for m in r['peak_rss_mib']):>24}")
    ratio = results["full"]["seconds"] / results["sampled-all"]["seconds"]
    print(f"full / sampled-all (same nodes): {ratio:.2f}x the time")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"settings": vars(args), "cpu": cpu, "dataset": meta, "results": results,
                                           "full_over_sampled_all": ratio}, indent=2))


if __name__ == "__main__":
    main()
