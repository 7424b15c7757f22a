"""Communication benchmark: the collectives fastsample uses, on each backend, same run.

    python bench/comm.py --ranks 2,4 --backends mpi,gloo,ccl \\
        --partitions data/medium-p2,data/products-p4

For each P and backend (one `mpiexec -n P` job each, bench/comm_worker.py):
  all_to_all_v  the same number of bytes to every other rank, 1 KiB .. 256 MiB per rank
                pair: time per call (the slowest rank's, median) and what one rank sends
                per second
  gather        with a partition built for P ranks: the feature gather of that graph's
                real training steps (fanouts, batch), i.e. the all-to-alls' real sizes
  all_reduce    the trainer's gradient bucket (GraphSAGE, hidden 256, 3 layers, the
                partition's feature width and classes; 100 and 47 without one)
All ranks run on this one machine, so this measures each library's shared-memory path
(ccl: oneCCL over MPI, CCL_ATL_TRANSPORT=mpi, unless set otherwise), not a network.
Outputs: table, --json, and --plot (time and throughput against message size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from fastsample.launcher import find_mpiexec


HERE = Path(__file__).resolve().parent
BACKENDS = ("mpi", "gloo", "ccl")


def sizes(lo: int, hi: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 4
    return out


def run(backend: str, ranks: int, args, partition: str | None) -> dict:
    cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks), sys.executable,
           str(HERE / "comm_worker.py"), backend, ",".join(map(str, sizes(args.min_bytes, args.max_bytes)))]
    if partition:
        cmd += [partition, args.fanouts, str(args.batch_size), str(args.steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def size_label(n: float) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:g} B"


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="2,4", help="comma-separated rank counts")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: mpi, gloo, ccl")
    p.add_argument("--partitions", default="",
                   help="comma-separated partition directories; the one built for P ranks adds the gather")
    p.add_argument("--min-bytes", type=int, default=1024, help="smallest all-to-all message per rank pair")
    p.add_argument("--max-bytes", type=int, default=256 * 2**20, help="largest (x4 steps from --min-bytes)")
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--steps", type=int, default=10, help="gather: training steps timed")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json", default=str(HERE / "out" / "comm.json"))
    p.add_argument("--plot", default=str(HERE / "out" / "comm.png"))
    args = p.parse_args()
    backends = args.backends.split(",")
    if bad := [b for b in backends if b not in BACKENDS]:
        p.error(f"--backends: unknown {', '.join(bad)} (choose from {', '.join(BACKENDS)})")
    try:
        ranks = [int(r) for r in args.ranks.split(",")]
    except ValueError:
        p.error(f"--ranks: expected comma-separated integers (got {args.ranks!r})")
    parts = {}
    for part in filter(None, args.partitions.split(",")):
        meta = Path(part) / "partition.json"
        if not meta.is_file():
            p.error(f"--partitions: {part} is not a partition (no partition.json)")
        parts[json.loads(meta.read_text())["num_parts"]] = part
    if "ccl" in backends:
        import importlib.util

        if importlib.util.find_spec("fastsample._ccl") is None:
            p.error("--backends ccl: fastsample is built without oneCCL (scripts/install-ccl.sh)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    results = []
    for P in ranks:
        for backend in backends:
            print(f"P={P} {backend} ...", flush=True)
            try:
                results.append(run(backend, P, args, parts.get(P)))
            except RuntimeError as e:
                sys.exit(f"bench/comm.py: error: {e}")
    report(args, results)


def report(args, results: list[dict]) -> None:
    print(f"\n{os.cpu_count()} cpus, one machine (shared memory); time: slowest rank, median; "
          "GB/s: bytes one rank sends to the others per second")
    backends = list(dict.fromkeys(r["backend"] for r in results))
    for P in sorted({r["ranks"] for r in results}):
        mine = {r["backend"]: {_key(row): row for row in r["rows"]} for r in results if r["ranks"] == P}
        keys = list(next(iter(mine.values())))
        head = f"P={P:<2} {'collective':<28}" + "".join(f"{b:>20}" for b in backends)
        print(f"\n{head}\n{'-' * len(head)}")
        for key in keys:
            cells = []
            for b in backends:
                row = mine[b].get(key)
                if row is None:
                    cells.append(f"{'-':>20}")
                elif row["op"] == "all_to_all_v":
                    cells.append(f"{row['seconds'] * 1e3:>10.3f} ms {row['gbps'] / 8:>5.2f} GB/s")
                else:
                    cells.append(f"{row['seconds'] * 1e3:>17.3f} ms")
            print(f"     {key:<28}" + "".join(cells))
        g = next((m["gather (real steps)"] for m in mine.values() if "gather (real steps)" in m), None)
        if g:
            print(f"     gather: {g['partition']}, fanouts {g['fanouts']}, batch {g['batch']}, {g['steps']} steps, "
                  f"{g['input_rows_per_step_rank0']:,.0f} input rows and {g['bytes_sent_per_step_rank0'] / 1e6:.1f} "
                  "MB sent per step by rank 0")
    Path(args.json).write_text(json.dumps({"settings": vars(args), "results": results}, indent=2))
    plot(results, Path(args.plot))
    print(f"\njson {args.json}, plot {args.plot}")


def _key(row: dict) -> str:
    if row["op"] == "all_to_all_v":
        return f"all_to_all_v {size_label(row['bytes_per_pair'])}/pair"
    if row["op"] == "gather":
        return "gather (real steps)"
    return f"all_reduce {size_label(row['bytes'])} grads"


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(10, 4.2))
    for r in results:
        rows = [row for row in r["rows"] if row["op"] == "all_to_all_v"]
        label = f"{r['backend']}, P={r['ranks']}"
        x = [row["bytes_per_pair"] for row in rows]
        ax_t.loglog(x, [row["seconds"] * 1e3 for row in rows], marker="o", label=label)
        ax_b.semilogx(x, [row["gbps"] / 8 for row in rows], marker="o", label=label)
    ax_t.set_ylabel("ms per all_to_all_v (slowest rank)")
    ax_b.set_ylabel("GB/s sent per rank")
    for ax in (ax_t, ax_b):
        ax.set_xlabel("bytes per rank pair")
        ax.grid(alpha=0.3, which="both")
    ax_t.legend(fontsize=7)
    fig.suptitle(f"all_to_all_v on one machine ({os.cpu_count()} cpus)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
