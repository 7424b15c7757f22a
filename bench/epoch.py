"""Epoch benchmark: the paper's three scenarios, and five more, on the same partitioned graph.

    vanilla               topology partitioned, 2L rounds per step (owner side: numba)
    hybrid-twostep        topology replicated, conventional two-step sampler, 2 rounds
    hybrid-native         topology replicated, fused native sampler, 2 rounds
    vanilla-native        vanilla with the native kernel on the owner side
    hybrid-blas           hybrid-native with the products pinned to BLAS (--matmul blas)
    hybrid-bf16           hybrid-native with --precision bf16
    hybrid-bf16-products  --precision bf16 with the products pinned to BLAS (bf16 products
                          whether they pay or not)
    hybrid-int8           hybrid-native with --precision int8 (the features in 8 bits)
--scenarios picks them (default: the first three).

Each scenario runs --reps times (median reported) for each partition given (one per P),
under each --net setting:
    none             ranks talk through shared memory (rounds are almost free here)
    model            every collective also waits its cost on a modelled network
                     (--latency-us, --gbps; formula in fastsample/comm/netmodel.py)
    namespaces       every rank in its own network namespace, joined by veths to a
                     bridge, each veth end rate-limited by tbf at --gbps; collectives
                     over real TCP (--backend gloo). No latency is added (the netem
                     qdisc is not in this kernel). Needs root; see bench/netns.py
none and model run --backend mpi; namespaces runs --backend gloo (MPI, over shared
memory, then carries only start-up agreement and abort).
A run is a fixed number of steps (--steps; 0 = one whole epoch) of `python -m
fastsample.train` under mpiexec, with --threads per rank, so the table reports time per
run, its split per phase, rounds and bytes per step, and the speed-up over vanilla.
--cache-fractions adds an axis: each scenario runs with each hot-feature cache size
(fastsample/distributed/cache.py, --cache-policy). With a non-zero fraction every run
trains 2 epochs and reports the second, so that the frequency policy, which pre-samples
epoch 0's batches, is measured on batches it did not see (and runs without a cache are
measured alike). --prefetch adds another: the depth of the trainer's prefetch (sample and
gather the next steps in a background thread while the model computes; 0 = off). "vs
base" compares each row with hybrid-native without cache or prefetch, same P and net.
Every row also reports the roofline: the products' floor (rank 0's matrix-product FLOPs,
counted from the MFGs it ran, at the throughput measured on those shapes on this CPU in
the same run; fastsample/nn/roofline.py) and the epoch's ratio to it.
Outputs: table, --json, --csv, a PNG bar chart like the paper's Figure 6, the phases of
each row stacked against its floor (--phases-plot), and with
several cache fractions a second PNG (--curve-plot): time and bytes per step against
the cache fraction.

    python bench/epoch.py --partitions data/products-2,data/products-4 --net none,model
    sudo python bench/epoch.py --partitions data/products-4 --net namespaces --gbps 25
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


from fastsample.launcher import find_mpiexec
from fastsample.nn.matmul import cpu_summary
from fastsample.trainer.metrics import TIMERS
from fastsample.trainer.runlog import read_log

HERE = Path(__file__).resolve().parent
# scenario -> (mode, sampler, more flags); vanilla's sampler is its owner side's choice
# kernel. hybrid-native runs the trainer's defaults (--matmul auto, --precision fp32);
# hybrid-blas pins the products to torch's BLAS (the default before --matmul existed);
# hybrid-bf16 is --precision bf16 as a user gets it, hybrid-bf16-products forces bf16 products.
SCENARIOS = {"vanilla": ("vanilla", "numba", []), "vanilla-native": ("vanilla", "native", []),
             "hybrid-twostep": ("hybrid", "twostep", []), "hybrid-native": ("hybrid", "native", []),
             "hybrid-blas": ("hybrid", "native", ["--matmul", "blas"]),
             "hybrid-bf16": ("hybrid", "native", ["--precision", "bf16"]),
             "hybrid-bf16-products": ("hybrid", "native", ["--precision", "bf16", "--matmul", "blas"]),
             "hybrid-int8": ("hybrid", "native", ["--precision", "int8"])}


class Interrupted(Exception):
    """SIGTERM or SIGINT, raised so that every `finally` (namespace teardown) runs."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def net_description(net: str, args) -> str:
    if net == "none":
        return "none = shared memory (MPI)"
    if net == "model":
        return f"model = {args.latency_us:g} us latency, {args.gbps:g} Gbit/s (MPI + modelled wait)"
    return f"namespaces = veth+bridge, tbf {args.gbps:g} Gbit/s, no added latency (gloo over TCP)"


def run_command(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run cmd in its own process group; on timeout, a signal or any error, end that group."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(wait)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


EXIT_ABORT = "terminate called without an active exception"


def _read_log(path: str) -> dict | None:
    """The last epoch record rank 0 wrote (EpochRecord's fields), or None when it wrote none
    (the run failed earlier)."""
    try:
        return dataclasses.asdict(read_log(path)[-1])
    except (OSError, IndexError, ValueError):
        return None


def run_once(partition: str, ranks: int, scenario: str, net: str, args, netns=None, cache: float = 0.0,
             prefetch: int = 0) -> dict:
    mode, sampler, flags = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.json")
        cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks)]
        if net == "namespaces":
            cmd += netns.wrapper()
        cmd += [sys.executable, "-m",
                "fastsample.train", "--data", partition, "--mode", mode, "--sampler", sampler,
                "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
                "--epochs", "2" if any(args.cache_fractions) else "1", "--eval-every", "0", "--quiet",
                "--threads", str(args.threads or max(1, (os.cpu_count() or 1) // ranks)), "--log-json", log]
        cmd += flags
        if args.task == "link":  # link prediction on a link-split partition (one drawn negative per edge)
            cmd += ["--task", "link"]
        if args.steps > 0:
            cmd += ["--max-steps", str(args.steps)]
        if cache:
            cmd += ["--cache-fraction", str(cache), "--cache-policy", args.cache_policy]
        if prefetch:
            cmd += ["--prefetch", str(prefetch)]
        if net == "model":
            cmd += ["--net-model", f"{args.latency_us},{args.gbps}"]
        if net == "namespaces":
            cmd += ["--backend", "gloo"]
            before = netns.counters()
        proc = run_command(cmd, args.timeout)
        record = _read_log(log)
        if proc.returncode != 0:
            if record is None or EXIT_ABORT not in proc.stderr:
                raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            # Training finished and rank 0 logged the epoch; a rank then aborted while the
            # process exited (a C++ thread still running after Python finalisation; seen
            # with --backend gloo in a few % of runs, with or without namespaces). The
            # timings are complete, so keep them, and say so.
            print(f"warning: {scenario} P={ranks} net={net}: a rank aborted at exit after training "
                  f"({EXIT_ABORT!r}); its results are kept", file=sys.stderr, flush=True)
            record["exit_abort"] = True
    record["steps"] = len(record.pop("step_losses", []))
    record["backend"] = "gloo" if net == "namespaces" else "mpi"
    if net == "namespaces":
        after = netns.counters()
        delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
        record["veth_tx_bytes_rank0"] = delta[0]["tx_bytes"]
        record["veth_rx_bytes_rank0"] = delta[0]["rx_bytes"]
        record["veth_tx_bytes_total"] = sum(d["tx_bytes"] for d in delta)
        record["tbf_drops_total"] = sum(d["tbf_drops"] for d in delta)
    return record


NETS = ("none", "model", "namespaces")


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", required=True, help="comma-separated partition dirs, one per rank count")
    p.add_argument("--scenarios", default="vanilla,hybrid-twostep,hybrid-native",
                   help=f"comma-separated, from {', '.join(SCENARIOS)}")
    p.add_argument("--net", default="none,model",
                   help="comma-separated: none, model, namespaces (namespaces needs root)")
    p.add_argument("--latency-us", type=float, default=10.0,
                   help="modelled per-message latency (--net model only: namespaces cannot add latency, "
                        "this kernel has no netem)")
    p.add_argument("--gbps", type=float, default=25.0,
                   help="link bandwidth, Gbit/s: modelled (--net model) and the tbf rate of every veth "
                        "(--net namespaces)")
    p.add_argument("--cache-fractions", default="0",
                   help="comma-separated hot-feature cache fractions to run each scenario with (0: no cache)")
    p.add_argument("--cache-policy", choices=["frequency", "degree"], default="frequency",
                   help="which rows the cache holds (python -m fastsample.train --cache-policy)")
    p.add_argument("--prefetch", default="0",
                   help="comma-separated prefetch depths to run each scenario with (0: off), e.g. 0,1")
    p.add_argument("--base", default="hybrid-native", help="the scenario 'vs base' compares with (its run without "
                   "cache and prefetch), e.g. hybrid-blas to compare the products' engines and precisions with "
                   "the BLAS fp32 path")
    p.add_argument("--task", choices=["node", "link"], default="node",
                   help="what each run trains (python -m fastsample.train --task); link needs link-split partitions")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="steps per run; 0: one whole epoch")
    p.add_argument("--threads", type=int, default=None, help="threads per rank (default: cores / P)")
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--timeout", type=float, default=900, help="seconds before one run is stopped")
    p.add_argument("--json", default=str(HERE / "out" / "epoch.json"))
    p.add_argument("--csv", default=str(HERE / "out" / "epoch.csv"))
    p.add_argument("--plot", default=str(HERE / "out" / "epoch.png"))
    p.add_argument("--phases-plot", default=None,
                   help="each row's phases stacked, against its products' floor (default: --plot's name + -phases)")
    p.add_argument("--curve-plot", default=str(HERE / "out" / "epoch-cache.png"),
                   help="time and bytes per step against the cache fraction (with several --cache-fractions)")
    args = p.parse_args()
    if args.phases_plot is None:
        args.phases_plot = str(Path(args.plot).with_name(Path(args.plot).stem + "-phases.png"))
    try:
        args.cache_fractions = [float(f) for f in args.cache_fractions.split(",")]
    except ValueError:
        p.error(f"--cache-fractions: expected comma-separated numbers (got {args.cache_fractions!r})")
    if any(not 0 <= f < 1 for f in args.cache_fractions):
        p.error("--cache-fractions must lie in [0, 1)")
    try:
        args.prefetch = [int(d) for d in args.prefetch.split(",")]
    except ValueError:
        p.error(f"--prefetch: expected comma-separated integers (got {args.prefetch!r})")
    if any(not 0 <= d <= 8 for d in args.prefetch):
        p.error("--prefetch depths must lie in 0..8")
    nets = args.net.split(",")
    scenarios = args.scenarios.split(",")
    if bad := [n for n in nets if n not in NETS]:
        p.error(f"--net: unknown {', '.join(bad)} (choose from {', '.join(NETS)})")
    if args.base not in SCENARIOS:
        p.error(f"--base: unknown {args.base} (choose from {', '.join(SCENARIOS)})")
    if bad := [s for s in scenarios if s not in SCENARIOS]:
        p.error(f"--scenarios: unknown {', '.join(bad)} (choose from {', '.join(SCENARIOS)})")
    if args.gbps <= 0:
        p.error("--gbps must be positive")
    if "namespaces" in nets:
        from netns import NetnsUnavailable, NetNamespaces

        try:
            NetNamespaces.check()
        except NetnsUnavailable as e:
            sys.exit(f"bench/epoch.py: error: {e}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    # SIGTERM (and SIGINT) become exceptions, so that the namespaces are torn down.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _raise_interrupted)
    try:
        rows = measure(args, nets, scenarios)
    except Interrupted as e:
        sys.stderr.write(f"bench/epoch.py: {e}\n")
        sys.exit(128 + e.signum)
    except RuntimeError as e:
        sys.exit(f"bench/epoch.py: error: {e}")
    report(args, nets, scenarios, rows)


def measure(args, nets, scenarios) -> list[dict]:
    rows = []
    for partition in args.partitions.split(","):
        ranks = json.loads((Path(partition) / "partition.json").read_text())["num_parts"]
        for net in nets:
            netns = None
            if net == "namespaces":
                from netns import NetNamespaces

                netns = NetNamespaces(ranks, args.gbps)
            with netns if netns is not None else contextlib.nullcontext():
                for scenario in scenarios:
                    for cache in args.cache_fractions:
                        for depth in args.prefetch:
                            runs = [run_once(partition, ranks, scenario, net, args, netns, cache, depth)
                                    for _ in range(args.reps)]
                            rows.append(summarise(partition, ranks, net, scenario, runs, args, cache, depth))

    def find(row, **want):
        return next((r for r in rows if r["ranks"] == row["ranks"] and r["net"] == row["net"]
                     and all(r[k] == v for k, v in want.items())), None)

    for row in rows:
        vanilla = find(row, scenario="vanilla", cache_fraction=row["cache_fraction"], prefetch=row["prefetch"])
        base = find(row, scenario=args.base, cache_fraction=0.0, prefetch=0)
        row["speedup_vs_vanilla"] = vanilla["epoch_s"] / row["epoch_s"] if vanilla else None
        row["speedup_vs_base"] = base["epoch_s"] / row["epoch_s"] if base else None
    return rows


def summarise(partition, ranks, net, scenario, runs, args, cache: float = 0.0, prefetch: int = 0) -> dict:
    med = {k: statistics.median(r[k] or 0.0 for r in runs) for k in ("epoch_s", *TIMERS)}
    floors = [r["products_floor_s"] for r in runs if r.get("products_floor_s")]
    modelled = [r["net_modelled_s"] for r in runs if r.get("net_modelled_s") is not None]
    row = {"partition": partition, "ranks": ranks, "net": net, "net_desc": net_description(net, args),
           "backend": runs[0]["backend"], "scenario": scenario, "cache_fraction": cache, "prefetch": prefetch,
           "cache_hit_rate": runs[0].get("cache_hit_rate"), "steps": runs[0]["steps"], **med,
           "rounds_per_step": runs[0]["rounds_per_step"], "bytes_sent_rank0": runs[0]["bytes_sent"],
           "net_modelled_s": statistics.median(modelled) if modelled else None,
           # the roofline: rank 0's product FLOPs, and their time at the speed measured in the same run
           "products_flop": runs[0].get("products_flop"),
           "products_floor_s": statistics.median(floors) if floors else None}
    row["x_floor"] = statistics.median(r["epoch_s"] / r["products_floor_s"] for r in runs
                                       if r.get("products_floor_s")) if floors else None
    for k in ("veth_tx_bytes_rank0", "veth_rx_bytes_rank0", "veth_tx_bytes_total", "tbf_drops_total"):
        row[k] = statistics.median(r[k] for r in runs) if k in runs[0] else None
    row["exit_aborts"] = sum(1 for r in runs if r.get("exit_abort"))
    row["runs_epoch_s"] = [r["epoch_s"] for r in runs]
    veth = (f", veth rank 0 sent {row['veth_tx_bytes_rank0'] / 1e6:.0f} MB, tbf drops {row['tbf_drops_total']:.0f}"
            if row["veth_tx_bytes_rank0"] is not None else "")
    print(f"P={ranks} net={net:10s} {scenario:15s} cache {cache:<4g} prefetch {prefetch} "
          f"{med['epoch_s']:7.2f} s / {row['steps']} steps "
          f"(runs {', '.join(f'{t:.2f}' for t in row['runs_epoch_s'])}){veth}"
          + (f", products floor {row['products_floor_s']:.2f} s ({row['x_floor']:.2f}x)" if row["x_floor"] else ""),
          flush=True)
    return row


def report(args, nets, scenarios, rows) -> None:
    descs = {net: net_description(net, args) for net in nets}
    print(f"\nfanouts {args.fanouts}, batch {args.batch_size}/rank, hidden {args.hidden}, "
          f"{'one whole epoch' if args.steps == 0 else f'{args.steps} steps'} per run, "
          f"{args.threads or 'cores / P'} threads per rank, "
          f"median of {args.reps} runs, {os.cpu_count()} cpus: {cpu_summary()}; net: {'; '.join(descs.values())}")
    head = (f"{'P':>2} {'net':>10} {'scenario':>15} {'cache':>5} {'pf':>2} {'hits':>6} {'time s':>7} {'sample':>7} "
            f"{'gather':>7} {'waited':>7} {'compute':>8} {'allred':>7} {'rounds':>6} {'MB/step':>8} {'veth MB':>8} "
            f"{'floor':>6} {'xfloor':>6} {'vs vanilla':>10} {'vs base':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        veth = f"{r['veth_tx_bytes_rank0'] / 1e6:>8.0f}" if r["veth_tx_bytes_rank0"] is not None else f"{'-':>8}"
        speedup = f"{r['speedup_vs_vanilla']:>9.2f}x" if r["speedup_vs_vanilla"] else f"{'-':>10}"
        vs_base = f"{r['speedup_vs_base']:>7.2f}x" if r["speedup_vs_base"] else f"{'-':>8}"
        hits = f"{r['cache_hit_rate']:>6.1%}" if r["cache_hit_rate"] is not None else f"{'-':>6}"
        print(f"{r['ranks']:>2} {r['net']:>10} {r['scenario']:>15} {r['cache_fraction']:>5g} {r['prefetch']:>2} {hits} "
              f"{r['epoch_s']:>7.2f} {r['sample_s']:>7.2f} {r['gather_s']:>7.2f} {r['wait_s']:>7.2f} "
              f"{r['compute_s']:>8.2f} {r['allreduce_s']:>7.2f} {r['rounds_per_step']:>6.0f} "
              f"{r['bytes_sent_rank0'] / 1e6 / r['steps']:>8.1f} {veth} "
              + (f"{r['products_floor_s']:>6.2f} {r['x_floor']:>5.2f}x" if r["x_floor"] else f"{'-':>6} {'-':>6}")
              + f" {speedup} {vs_base}")
    print(f"vs base: against {args.base} without cache and prefetch; pf: prefetch depth; waited: time rank 0's trainer waited for its batches (sample + gather without "
          "prefetch, what prefetch did not hide with it); MB/step: sent by rank 0 per step, as counted by fastsample")
    print("floor: rank 0's matrix products alone, their FLOPs counted from the MFGs it ran, at the throughput "
          "measured on those shapes on this CPU in the same run (fastsample/nn/roofline.py); xfloor: time / floor")
    print("veth MB: bytes rank 0's veth sent "
          "(TCP/IP framing and gloo's headers included), namespaces only; hits: share of rank 0's non-owned "
          f"input rows its cache held ({args.cache_policy} policy)")
    Path(args.json).write_text(json.dumps({"settings": {**vars(args), "net_settings": descs}, "rows": rows},
                                          indent=2))
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "runs_epoch_s"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, scenarios, nets, Path(args.plot), "\n".join(descs.values()))
    plot_phases(rows, Path(args.phases_plot), "\n".join(descs.values()))
    print(f"json {args.json}, csv {args.csv}, plot {args.plot}, phases against the floor {args.phases_plot}")
    if len(args.cache_fractions) > 1:
        plot_cache_curve(rows, nets, Path(args.curve_plot), "\n".join(descs.values()))
        print(f"cache curve {args.curve_plot}")


def plot(rows, scenarios, nets, path: Path, net_desc: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["ranks"], r["net"]) for r in rows}, key=lambda g: (g[0], nets.index(g[1])))
    fig, ax = plt.subplots(figsize=(1.8 + 1.9 * len(groups), 4.2))
    # one bar per scenario and cache size
    variants = sorted({(r["scenario"], r["cache_fraction"], r["prefetch"]) for r in rows},
                      key=lambda v: (scenarios.index(v[0]), v[1], v[2]))
    several = len({v[1:] for v in variants}) > 1
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        scenario, cache, depth = variant
        mine = {(r["ranks"], r["net"]): r for r in rows
                if (r["scenario"], r["cache_fraction"], r["prefetch"]) == variant}
        bars = ax.bar([k + i * width for k in range(len(groups))], [mine[g]["epoch_s"] for g in groups], width,
                      label=f"{scenario}, cache {cache:g}, prefetch {depth}" if several else scenario)
        for b, g in zip(bars, groups):
            sp = mine[g]["speedup_vs_vanilla"]
            if sp is not None:
                ax.annotate(f"{sp:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                            va="bottom", fontsize=7)
    ax.set_xticks([k + width * (len(variants) - 1) / 2 for k in range(len(groups))])
    ax.set_xticklabels([f"P={p}\nnet {n}" for p, n in groups])
    ax.set_ylabel(f"seconds per {rows[0]['steps']} steps")
    ax.set_title(f"fastsample epoch time; net:\n{net_desc}", fontsize=7)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


PHASES = (("sample_s", "sample"), ("gather_s", "gather"), ("compute_s", "compute"), ("allreduce_s", "all-reduce"),
          ("optimizer_s", "optimizer"))


def plot_phases(rows, path: Path, net_desc: str) -> None:
    """One stacked bar per row (scenario, P, net, cache, prefetch): rank 0's phases (with
    prefetch: the time the loop waited for its batches in place of sample and gather), the
    rest of the epoch as "other", and a mark at the products' floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2 + 0.9 * len(rows), 4.4))
    bottoms = [0.0] * len(rows)
    for key, name in (*PHASES, ("other", "other")):
        vals = []
        for r in rows:
            if key == "other":
                v = r["epoch_s"] - sum(r[k] for k, _ in PHASES if not (r["prefetch"] and k in ("sample_s", "gather_s")))
                v -= r["wait_s"] if r["prefetch"] else 0.0
            elif r["prefetch"] and key in ("sample_s", "gather_s"):
                v = r["wait_s"] if key == "gather_s" else 0.0
            else:
                v = r[key]
            vals.append(max(v, 0.0))
        ax.bar(range(len(rows)), vals, 0.6, bottom=bottoms, label=name if name != "gather" else "gather (with prefetch: waited)")
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, r in enumerate(rows):
        if r["products_floor_s"]:
            ax.hlines(r["products_floor_s"], i - 0.4, i + 0.4, colors="k", linestyles="--",
                      label="products' floor" if i == 0 else None)
            ax.annotate(f"{r['x_floor']:.2f}x", (i, r["epoch_s"]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['scenario']}\nP={r['ranks']} {r['net']}" + (f"\ncache {r['cache_fraction']:g}"
                        if r["cache_fraction"] else "") + (f"\npf {r['prefetch']}" if r["prefetch"] else "")
                        for r in rows], fontsize=7)
    ax.set_ylabel(f"seconds per {rows[0]['steps']} steps (rank 0)")
    ax.set_title(f"phases against the products' floor; net:\n{net_desc}", fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_cache_curve(rows, nets, path: Path, net_desc: str) -> None:
    """hybrid-native's time and bytes per step against the cache fraction: one line per P,
    net and prefetch depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["scenario"] == "hybrid-native"]
    lines = sorted({(r["ranks"], r["net"], r["prefetch"]) for r in mine}, key=lambda g: (g[0], nets.index(g[1]), g[2]))
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(10, 4.2))
    for ranks, net, depth in lines:
        pts = sorted((r for r in mine if (r["ranks"], r["net"], r["prefetch"]) == (ranks, net, depth)),
                     key=lambda r: r["cache_fraction"])
        label = f"P={ranks}, net {net}, prefetch {depth}"
        x = [r["cache_fraction"] for r in pts]
        ax_t.plot(x, [r["epoch_s"] / r["steps"] for r in pts], marker="o", label=label)
        ax_b.plot(x, [r["bytes_sent_rank0"] / r["steps"] / 1e6 for r in pts], marker="o", label=label)
    ax_t.set_ylabel("seconds per step")
    ax_b.set_ylabel("MB sent per step by rank 0")
    for ax in (ax_t, ax_b):
        ax.set_xlabel("cache fraction (of all nodes, per rank)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    ax_t.legend(fontsize=7)
    fig.suptitle(f"hybrid-native with a hot-feature cache; net:\n{net_desc}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
