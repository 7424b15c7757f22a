"""Epoch benchmark: the paper's three scenarios on the same partitioned graph.

    vanilla          topology partitioned, 2L rounds per step
    hybrid-twostep   topology replicated, conventional two-step sampler, 2 rounds
    hybrid-native    topology replicated, fused native sampler, 2 rounds

Each scenario runs --reps times (median reported) for each partition given (one per P),
under each --net setting:
    none             ranks talk through shared memory (rounds are almost free here)
    model            every collective also waits its cost on a modelled network
                     (--latency-us, --gbps; formula in fastsample/comm/netmodel.py)
A run is a fixed number of steps (--steps) of `python -m fastsample.train` under mpiexec,
so the table reports time per --steps steps, its split per phase, rounds and bytes per
step, and the speed-up over vanilla. Outputs: table, --json, --csv, and a PNG bar chart
like the paper's Figure 6.

    python bench/epoch.py --partitions data/products-2,data/products-4 --net none,model
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = {"vanilla": ("vanilla", "numba"), "hybrid-twostep": ("hybrid", "twostep"),
             "hybrid-native": ("hybrid", "native")}
PHASES = ("sample_s", "gather_s", "compute_s", "allreduce_s")


def run_once(partition: str, ranks: int, scenario: str, net: str, args) -> dict:
    mode, sampler = SCENARIOS[scenario]
    mpiexec = Path(sys.executable).parent / "mpiexec"
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.json")
        cmd = [str(mpiexec if mpiexec.exists() else "mpiexec"), "-n", str(ranks), sys.executable, "-m",
               "fastsample.train", "--data", partition, "--mode", mode, "--sampler", sampler,
               "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
               "--epochs", "1", "--max-steps", str(args.steps), "--eval-every", "0", "--quiet",
               "--threads", str(max(1, (os.cpu_count() or 1) // ranks)), "--log-json", log]
        if net == "model":
            cmd += ["--net-model", f"{args.latency_us},{args.gbps}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
        record = json.loads(open(log).read().splitlines()[0])
    record.pop("step_losses", None)
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", required=True, help="comma-separated partition dirs, one per rank count")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--net", default="none,model", help="none, model, or both (comma-separated)")
    p.add_argument("--latency-us", type=float, default=10.0, help="modelled per-message latency")
    p.add_argument("--gbps", type=float, default=25.0, help="modelled link bandwidth, Gbit/s")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--json", default=str(HERE / "out" / "epoch.json"))
    p.add_argument("--csv", default=str(HERE / "out" / "epoch.csv"))
    p.add_argument("--plot", default=str(HERE / "out" / "epoch.png"))
    args = p.parse_args()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    nets = args.net.split(",")
    scenarios = args.scenarios.split(",")

    rows = []
    for partition in args.partitions.split(","):
        ranks = json.loads((Path(partition) / "partition.json").read_text())["num_parts"]
        for net in nets:
            for scenario in scenarios:
                runs = [run_once(partition, ranks, scenario, net, args) for _ in range(args.reps)]
                med = {k: statistics.median(r[k] for r in runs) for k in ("epoch_s", *PHASES)}
                modelled = [r["net_modelled_s"] for r in runs if r.get("net_modelled_s") is not None]
                row = {"partition": partition, "ranks": ranks, "net": net, "scenario": scenario,
                       "steps": args.steps, **med, "rounds_per_step": runs[0]["rounds_per_step"],
                       "bytes_sent_rank0": runs[0]["bytes_sent"],
                       "net_modelled_s": statistics.median(modelled) if modelled else None,
                       "runs_epoch_s": [r["epoch_s"] for r in runs]}
                rows.append(row)
                print(f"P={ranks} net={net:5s} {scenario:15s} {med['epoch_s']:7.2f} s / {args.steps} steps "
                      f"(runs {', '.join(f'{t:.2f}' for t in row['runs_epoch_s'])})", flush=True)
    for row in rows:
        base = next(r for r in rows if r["ranks"] == row["ranks"] and r["net"] == row["net"]
                    and r["scenario"] == "vanilla")
        row["speedup_vs_vanilla"] = base["epoch_s"] / row["epoch_s"]

    net_desc = f"model = {args.latency_us:g} us latency, {args.gbps:g} Gbit/s"
    print(f"\nfanouts {args.fanouts}, batch {args.batch_size}/rank, hidden {args.hidden}, {args.steps} steps, "
          f"median of {args.reps} runs, {os.cpu_count()} cpus; net: none = shared memory, {net_desc}")
    head = (f"{'P':>2} {'net':>5} {'scenario':>15} {'time s':>7} {'sample':>7} {'gather':>7} {'compute':>8} "
            f"{'allred':>7} {'rounds':>6} {'MB sent':>8} {'vs vanilla':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['ranks']:>2} {r['net']:>5} {r['scenario']:>15} {r['epoch_s']:>7.2f} {r['sample_s']:>7.2f} "
              f"{r['gather_s']:>7.2f} {r['compute_s']:>8.2f} {r['allreduce_s']:>7.2f} {r['rounds_per_step']:>6.0f} "
              f"{r['bytes_sent_rank0'] / 1e6:>8.0f} {r['speedup_vs_vanilla']:>9.2f}x")
    Path(args.json).write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2))
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "runs_epoch_s"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, scenarios, Path(args.plot), net_desc)
    print(f"json {args.json}, csv {args.csv}, plot {args.plot}")


def plot(rows, scenarios, path: Path, net_desc: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["ranks"], r["net"]) for r in rows})
    fig, ax = plt.subplots(figsize=(1.8 + 1.9 * len(groups), 3.8))
    width = 0.8 / len(scenarios)
    for i, scenario in enumerate(scenarios):
        ys = [next(r["epoch_s"] for r in rows if (r["ranks"], r["net"]) == g and r["scenario"] == scenario)
              for g in groups]
        bars = ax.bar([k + i * width for k in range(len(groups))], ys, width, label=scenario)
        for b, g in zip(bars, groups):
            sp = next(r["speedup_vs_vanilla"] for r in rows if (r["ranks"], r["net"]) == g and r["scenario"] == scenario)
            ax.annotate(f"{sp:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks([k + width * (len(scenarios) - 1) / 2 for k in range(len(groups))])
    ax.set_xticklabels([f"P={p}\nnet {n}" for p, n in groups])
    ax.set_ylabel(f"seconds per {rows[0]['steps']} steps")
    ax.set_title(f"fastsample epoch time (net {net_desc})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
