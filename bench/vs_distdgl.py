"""Epoch against DistDGL, same graph, same work, same run: fastsample's and DistDGL's trainers,
untyped (GraphSAGE) or typed (R-GCN), by the kind of the dataset partitioned.

Runs the systems alternately (rounds x [fastsample, each DistDGL]) at 2 ranks x 1 thread on
one dataset, each partitioned by its own system's partitioner:

  fastsample   mpiexec -n 2 python -m fastsample.train --data OURS_PARTITION ...
               (python -m fastsample.partition DATASET OURS_PARTITION --parts 2)
  DistDGL 1.1.3  bench/distdgl/run_distdgl.sh DGL_PART_CONFIG ... (bench/distdgl/train.py;
               bench/distdgl/partition.py DATASET DIR --parts 2, METIS, under DGL 1.1.3): --dgl
  DistDGL 2.1 + GraphBolt  the same harness under DGL 2.1, its servers sampling with GraphBolt
               (initialize(..., use_graphbolt=True); partition.py --graphbolt, which runs
               dgl_partition_to_graphbolt): --graphbolt
and prints the settings, the CPU, per-phase medians of the measured epochs (epoch 0 of every
run is warm-up) for every column, and the epoch ratios DistDGL / fastsample.

Each DistDGL runs in two environments (--distdgl, default both), each a column of its own:
  like     like for like, the headline: every process of both sides gets the allocator
           tuning fastsample gives itself (GLIBC_TUNABLES=glibc.malloc.mmap_max=0:
           glibc.malloc.trim_threshold=2147483647: freed memory kept, no page faults per
           step) and DistDGL's /dev/shm (its graph and features) is a tmpfs with huge pages
           (huge=always), as fastsample's feature shards are read into huge pages
  shipped  as DistDGL is shipped and run: glibc's defaults, 4 KiB tmpfs pages
fastsample runs the same in both (its tuning is its own, applied at start-up; the like
environment is exported to it too), once per --precisions entry (fp32, bf16, int8: each a column).
What each DistDGL machine ran with (its GLIBC_TUNABLES, its /dev/shm mount) is in
results.json ("distdgl_environment"). With --cache-fraction F every round runs fastsample
a second time per --precisions entry with its hot-feature cache (the same losses bitwise,
fewer rows fetched), each a column of its own. The work is the same on every side: fanouts
(typed: per relation on both), batch per rank, hidden width, layers; untyped GraphSAGE =
SAGEConv(mean) per layer; R-GCN = per relation SAGEConv(mean) summed over relations (DGL:
HeteroGraphConv(..., aggregate='sum')); ReLU + dropout, Adam on dense weights; typed,
learnable N(0,1) embeddings (--embed-dim) for featureless types updated by sparse Adam
(fastsample's RowAdam at the owners; DGL's DistEmbedding + SparseAdam).

Every timed run holds `flock LOCK` (--lock; the CPU is shared with other benchmarks), and the
CPU seconds other processes used meanwhile are reported per run; holding the lock, each run
first waits (--quiet-wait) for other processes' load to stop, and a run disturbed anyway
(--max-foreign-cpu) is repeated (--retries). Needs root (the DistDGL harness's unshare/tmpfs).

usage (hetero-medium; untyped `medium` the same way):
  .venv/bin/python bench/vs_distdgl.py --ours /tmp/w/hm-2 --dgl /tmp/w/dgt/hm-2/graph.json
      --graphbolt /tmp/w/dgt/hm-2-gb/graph.json --rounds 1 --epochs 4 --out /tmp/w/dgt/cmp-hm
  (partitions: python -m fastsample.partition /tmp/w/hm /tmp/w/hm-2 --parts 2;
   bench/out/dgl-envs/dgl113/bin/python bench/distdgl/partition.py /tmp/w/hm /tmp/w/dgt/hm-2;
   bench/out/dgl-envs/dgl210gb/bin/python bench/distdgl/partition.py /tmp/w/hm /tmp/w/dgt/hm-2-gb --graphbolt)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fastsample.choices import PRECISIONS

from timing import cpu_model

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
from fastsample.allocator import TUNABLES  # noqa: E402  (the string fastsample's own tuning amounts to)
from fastsample.trainer.runlog import read_records  # noqa: E402

ENVIRONMENTS = {"like": "like for like", "shipped": "as shipped"}
PHASES = [  # (label, fastsample's record keys summed, DistDGL's keys summed)
    ("sample", ["sample_s"], ["sample_s"]),
    ("gather / fetch (features, embedding rows, labels)", ["gather_s"], ["fetch_s"]),
    ("compute (forward + loss + backward)", ["compute_s"], ["compute_s"]),
    ("all-reduce (dense gradients)", ["allreduce_s"], ["allreduce_s"]),
    ("dense optimizer step (Adam)", ["optimizer_s"], ["optimizer_s"]),
    ("embedding update (grads to owners + sparse Adam)", ["embed_grads_s", "embed_update_s"], ["embed_update_s"]),
]


def die(msg: str):
    sys.exit(f"vs_distdgl.py: {msg}")


class ForeignCPU:
    """CPU seconds used, while a run is timed, by processes outside this driver's tree (another
    benchmark on the shared CPU that does not take the lock): /proc scanned every 0.5 s, each
    foreign process's utime + stime growth summed (processes living < 0.5 s are missed)."""

    def __init__(self):
        import threading
        self.tick = os.sysconf("SC_CLK_TCK")
        self.first, self.last, self.stop = {}, {}, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _scan(self):
        procs = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
                    procs[int(d)] = (int(f[1]), int(f[11]) + int(f[12]))  # ppid, utime + stime
                except (OSError, IndexError, ValueError):
                    pass
        me = os.getpid()
        for pid, (ppid, t) in procs.items():
            q, mine = pid, False
            for _ in range(64):
                if q == me:
                    mine = True
                    break
                if q not in procs or q <= 1:
                    break
                q = procs[q][0]
            if not mine:
                self.first.setdefault(pid, t)
                self.last[pid] = t

    def _loop(self):
        while not self.stop.wait(0.5):
            self._scan()

    def __enter__(self):
        self._scan()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.seconds = sum(self.last[p] - self.first[p] for p in self.last) / self.tick


def source_state() -> str:
    """fastsample's code as run: HEAD and a digest of uncommitted changes under fastsample/ and
    native/ (the tree may change between runs when others work in it)."""
    import hashlib
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO).stdout  # noqa: E731
    head = git("rev-parse", "--short", "HEAD").strip()
    diff = git("diff", "HEAD", "--", "fastsample", "native")
    return head + (f"+dirty:{hashlib.sha1(diff.encode()).hexdigest()[:8]}" if diff else "")


def quiet_wait(max_s: float, cores: float = 0.15, window: float = 3.0) -> float:
    """Waits (up to max_s) until processes outside this driver's tree use under `cores` CPUs
    over a window; returns the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < max_s:
        with ForeignCPU() as fc:
            time.sleep(window)
        if fc.seconds < cores * window:
            break
    return time.perf_counter() - t0


def run(cmd: list, log: Path, env=None, lock=None, quiet_s: float = 0.0) -> tuple[float, float]:
    """Runs cmd holding LOCK (flock(2), as flock(1) takes it: `flock LOCK cmd`), after waiting up
    to quiet_s for the CPU to be free of foreign load; returns (wall seconds once the lock is
    held and the wait is over, foreign CPU seconds meanwhile: see ForeignCPU)."""
    import fcntl
    lf = open(lock, "a") if lock else None
    try:
        if lf:
            fcntl.flock(lf, fcntl.LOCK_EX)
        if quiet_s:
            waited = quiet_wait(quiet_s)
            if waited > 5:
                print(f"  (waited {waited:.0f} s for other processes' load to stop)", flush=True)
        t0 = time.perf_counter()
        with open(log, "w") as f, ForeignCPU() as fc:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO).returncode
        wall = time.perf_counter() - t0
    finally:
        if lf:
            fcntl.flock(lf, fcntl.LOCK_UN)
            lf.close()
    if rc:
        tail = log.read_text()[-3000:]
        die(f"{' '.join(map(str, cmd))} exited {rc}; the end of {log}:\n{tail}")
    return wall, fc.seconds


def side_env(base: dict, setting: str) -> dict:
    """The environment of a setting's processes (both sides' alike): "like" adds the allocator
    tuning (GLIBC_TUNABLES: every DistDGL server and trainer inherits it) and huge pages for
    DistDGL's /dev/shm (SHM_HUGE, read by distdgl/shm.sh); "shipped" has neither."""
    env = {k: v for k, v in base.items() if k not in ("GLIBC_TUNABLES", "SHM_HUGE")}
    if setting == "like":
        env |= {"GLIBC_TUNABLES": TUNABLES, "SHM_HUGE": "always"}
    elif setting != "shipped":
        raise ValueError(f"unknown setting {setting!r} (like, shipped)")
    return env


def median(rows, keys):
    return statistics.median(sum(r[k] or 0.0 for k in keys) for r in rows)


PEERS = {  # flag: (column prefix, default python, whether its servers sample with GraphBolt)
    "dgl": ("DistDGL 1.1.3", "bench/out/dgl-envs/dgl113/bin/python", False),
    "graphbolt": ("DistDGL 2.1 + GraphBolt", "bench/out/dgl-envs/dgl210gb/bin/python", True),
}
DEFAULTS = {"untyped": {"fanouts": "15,10,5", "batch_size": 1000}, "typed": {"fanouts": "15,10", "batch_size": 1024}}


def peer_partition(flag: str, config: str, python: str, ours_source: Path, ranks: int) -> tuple[Path, dict]:
    """A DistDGL partition config checked against what the comparison needs; returns it and its info.json."""
    cfg = Path(config).resolve()
    info_path = cfg.parent / "info.json"
    if not cfg.is_file() or not info_path.exists():
        die(f"--{flag} {cfg} (and info.json beside it) not found: partition with bench/distdgl/partition.py")
    info, parts = json.loads(info_path.read_text()), json.loads(cfg.read_text())["num_parts"]
    if PEERS[flag][2] and not info.get("graphbolt"):
        die(f"--{flag} {cfg}: not converted for GraphBolt (bench/distdgl/partition.py --graphbolt, under DGL 2.1)")
    if Path(info["dataset"]).resolve() != ours_source:
        die(f"--{flag} {cfg} is a partition of {info['dataset']}, fastsample's of {ours_source}")
    if parts != ranks:
        die(f"--{flag} {cfg}: {parts} parts, --ranks {ranks}")
    if not Path(python).exists():
        die(f"--{flag}-python {python} not found (bench/setup_dgl.sh makes one)")
    return cfg, info


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="fastsample partition directory (python -m fastsample.partition)")
    for flag, (name, python, graphbolt) in PEERS.items():
        ap.add_argument(f"--{flag}", help=f"{name}'s partition config JSON (bench/distdgl/partition.py"
                        + (" --graphbolt" if graphbolt else "") + "; at least one of --dgl, --graphbolt)")
        ap.add_argument(f"--{flag}-python", default=str(REPO / python), help=f"a python with {name}'s torch and dgl "
                        "(bench/setup_dgl.sh)")
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"), help="fastsample's python")
    ap.add_argument("--mpiexec", default=str(REPO / ".venv/bin/mpiexec"))
    ap.add_argument("--rounds", type=int, default=2, help="alternations fastsample, DistDGL (default 2)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run, the first warm-up (default 3)")
    ap.add_argument("--fanouts", help="per layer, input layer first; typed: per relation on both sides "
                    "(default: untyped 15,10,5, typed 15,10)")
    ap.add_argument("--batch-size", type=int, help="training seeds per rank per step (default: untyped 1000, typed 1024)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.006, help="Adam, dense weights")
    ap.add_argument("--embed-lr", type=float, default=0.01, help="typed: sparse Adam, embeddings")
    ap.add_argument("--embed-dim", type=int, default=64, help="typed: featureless types' embedding width")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--precisions", default="fp32",
                    help="fastsample's --precision, one column each, e.g. fp32,bf16,int8 (default fp32)")
    ap.add_argument("--cache-fraction", type=float, default=0.0,
                    help="also run fastsample with this --cache-fraction each round, at each of --precisions, "
                         "a column each (default: 0, not)")
    ap.add_argument("--lock", default="/tmp/w/bench.lock", help="flock file around every timed run ('' : none)")
    ap.add_argument("--timeout", type=int, default=1800, help="DistDGL run timeout, seconds")
    ap.add_argument("--quiet-wait", type=float, default=300,
                    help="holding the lock, wait up to this many seconds for other processes' CPU load to stop "
                         "before each run (0: do not wait) (default 300)")
    ap.add_argument("--max-foreign-cpu", type=float, default=5.0,
                    help="repeat a fastsample run during which other processes used more CPU seconds than this "
                         "(3x for a DistDGL run, which lasts ~3x longer) (default 5)")
    ap.add_argument("--retries", type=int, default=2, help="repeats of a disturbed run at most (default 2)")
    ap.add_argument("--out", required=True, help="directory for the logs and results.json")
    ap.add_argument("--distdgl", default="like,shipped",
                    help="DistDGL's environments, each a column: like (for like: fastsample's allocator tuning and "
                         "huge pages given to DistDGL too), shipped (glibc's defaults, 4 KiB pages) (default: both)")
    a = ap.parse_args()
    environments = [e.strip() for e in a.distdgl.split(",")]
    if not a.distdgl or any(e not in ENVIRONMENTS for e in environments):
        die(f"--distdgl {a.distdgl!r}: a comma-separated list of {', '.join(ENVIRONMENTS)}")
    precisions = [x.strip() for x in a.precisions.split(",")]
    if not precisions or any(x not in PRECISIONS for x in precisions):
        die(f"--precisions {a.precisions!r}: a comma-separated list of {', '.join(PRECISIONS)}")
    if not (a.dgl or a.graphbolt):
        die("nothing to compare with: give --dgl (DistDGL 1.1.3's partition) and/or --graphbolt (DGL 2.1's)")

    ours = Path(a.ours).resolve()
    if not (ours / "partition.json").exists():
        die(f"{ours}/partition.json not found: --ours must be a fastsample partition directory")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        die("the DistDGL harness needs root and unshare (a private /dev/shm per simulated machine)")
    part = json.loads((ours / "partition.json").read_text())
    if part["num_parts"] != a.ranks:
        die(f"--ranks {a.ranks}, but fastsample's partition has {part['num_parts']} parts")
    source = Path(part["source"]).resolve()
    peers = {flag: (*peer_partition(flag, getattr(a, flag), getattr(a, f"{flag}_python"), source, a.ranks),
                    getattr(a, f"{flag}_python")) for flag in PEERS if getattr(a, flag)}
    meta = part["dataset"]
    kind = "typed" if "node_types" in meta else "untyped"
    kinds = {flag: info["kind"] for flag, (_, info, _) in peers.items()}
    if set(kinds.values()) != {kind}:
        die(f"fastsample's partition is {kind}, DistDGL's {kinds}: partition the same dataset")
    a.fanouts = a.fanouts or DEFAULTS[kind]["fanouts"]
    a.batch_size = a.batch_size or DEFAULTS[kind]["batch_size"]
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    layers = len(a.fanouts.split(","))
    typed_settings = {"node_types": meta["node_types"], "relations": len(meta["edge_types"]),
                      "featureless": next(iter(peers.values()))[1]["featureless"], "embed_lr": a.embed_lr,
                      "embed_dim": a.embed_dim} if kind == "typed" else {}
    settings = {"dataset": str(source), "kind": kind, "model": "R-GCN" if kind == "typed" else "GraphSAGE",
                "nodes": meta["num_nodes"], "edges": meta["num_edges"], **typed_settings,
                "ranks": a.ranks, "threads": a.threads,
                "fanouts (input layer first" + (", per relation)" if kind == "typed" else ")"): a.fanouts,
                "layers": layers, "batch per rank": a.batch_size, "hidden": a.hidden, "dropout": a.dropout, "lr": a.lr,
                "epochs per run": a.epochs, "rounds": a.rounds, "fastsample precisions": precisions,
                "cache_fraction (second fastsample run)": a.cache_fraction or None,
                "cpu": cpu_model(), "fastsample source": source_state(),
                "peers": {PEERS[f][0]: str(cfg) for f, (cfg, _, _) in peers.items()},
                "distdgl environments": environments}
    print("settings: " + json.dumps(settings), flush=True)

    base = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    lock = a.lock or None
    variants = {"fastsample" + ("" if p == "fp32" else f" {p}"): ["--precision", p] for p in precisions}
    if a.cache_fraction:
        variants.update({f"{v}, cache {a.cache_fraction:g}": [*args, "--cache-fraction", str(a.cache_fraction)]
                         for v, args in list(variants.items())})
    typed_args = ["--embed-lr", str(a.embed_lr), "--embed-dim", str(a.embed_dim)] if kind == "typed" else []
    dgl_runs = {f"{PEERS[flag][0]} {ENVIRONMENTS[setting]}": (flag, setting)
                for flag in peers for setting in environments}
    rec = {**{v: [] for v in variants}, **{n: [] for n in dgl_runs}}
    walls = {k: [] for k in rec}
    foreign_cpu = {k: [] for k in rec}
    environment = {n: [] for n in dgl_runs}  # per run: each DistDGL machine's env*.txt
    versions = {}  # DistDGL column: its trainer's dgl and torch
    sources = [settings["fastsample source"]]
    discarded = []
    for r in range(a.rounds):
        for v, (name, extra) in enumerate(variants.items()):
            tag = f"fastsample-{r}" + (f"-{v}" if v else "")
            log_json = out / f"{tag}.jsonl"
            cmd = [a.mpiexec, "-n", str(a.ranks), a.python, "-m", "fastsample.train", "--data", str(ours),
                   "--fanouts", a.fanouts, "--layers", str(layers), "--batch-size", str(a.batch_size),
                   "--hidden", str(a.hidden), "--dropout", str(a.dropout), "--lr", str(a.lr), *typed_args,
                   "--threads", str(a.threads), "--epochs", str(a.epochs), "--eval-every", "0",
                   "--log-json", str(log_json), "--quiet", *extra]
            for attempt in range(a.retries + 1):
                log_json.unlink(missing_ok=True)
                w, foreign = run(cmd, out / f"{tag}.log", side_env(base, "like"), lock, a.quiet_wait)
                if foreign <= a.max_foreign_cpu or attempt == a.retries:
                    break
                discarded.append({"system": name, "round": r, "foreign_cpu_s": foreign, "log": log_json.read_text()})
                print(f"round {r}: {name} run discarded: {foreign:.1f} CPU s by other processes meanwhile "
                      f"(> --max-foreign-cpu {a.max_foreign_cpu}); again", flush=True)
            rows = read_records(log_json)
            sources.append(source_state())
            rec[name] += [x for x in rows if x["epoch"] > 0]
            walls[name].append(w)
            foreign_cpu[name].append(foreign)
            print(f"round {r}: {name} epochs " + ", ".join(f"{x['epoch_s']:.2f}" for x in rows) + f" s (run {w:.0f} s, "
                  f"{foreign:.1f} CPU s by other processes meanwhile)", flush=True)

        for name, (flag, setting) in dgl_runs.items():
            cfg, _, python = peers[flag]
            tag = f"{flag}-{setting}-{r}"
            logdir = out / tag
            cmd = ["bash", str(HERE / "distdgl/run_distdgl.sh"), str(cfg), str(logdir), str(a.threads),
                   str(a.epochs), str(a.timeout), "--batch_size", str(a.batch_size), "--fanouts", a.fanouts,
                   "--hidden", str(a.hidden), "--dropout", str(a.dropout), "--lr", str(a.lr), "--embed_lr",
                   str(a.embed_lr), "--embed_dim", str(a.embed_dim)]
            env = side_env(base | {"PY": python, "USE_GRAPHBOLT": "1" if PEERS[flag][2] else "0"}, setting)
            for attempt in range(a.retries + 1):
                w, foreign = run(cmd, out / f"{tag}.log", env, lock, a.quiet_wait)
                if foreign <= a.max_foreign_cpu * 3 or attempt == a.retries:  # a DistDGL run is ~3x longer
                    break
                discarded.append({"system": name, "round": r, "foreign_cpu_s": foreign,
                                  "log": (logdir / "results.jsonl").read_text()})
                print(f"round {r}: {name} run discarded: {foreign:.1f} CPU s by other processes meanwhile "
                      f"(> 3 x --max-foreign-cpu); again", flush=True)
            res = [json.loads(line) for line in (logdir / "results.jsonl").read_text().splitlines() if line.strip()]
            summary0 = next(x for x in res if x["summary"]["rank"] == 0)
            r0 = summary0["epochs"]
            versions[name] = {k: summary0["summary"].get(k) for k in ("dgl", "torch", "graphbolt")}
            rec[name] += [x for x in r0 if not x["warmup"]]
            walls[name].append(w)
            foreign_cpu[name].append(foreign)
            environment[name].append({f.stem: f.read_text().strip() for f in sorted(logdir.glob("env*.txt"))})
            print(f"round {r}: {name} epochs " + ", ".join(f"{x['epoch_s']:.2f}" for x in r0) + f" s (run {w:.0f} s, "
                  f"{foreign:.1f} CPU s by other processes meanwhile; "
                  f"{r0[-1]['batches']} steps, {r0[-1]['avg_input_nodes']} input nodes and "
                  f"{r0[-1]['avg_sampled_edges']} sampled edges per step)", flush=True)

    medians = {}
    for name, rows in rec.items():
        dgl = name in environment
        side = [kd if dgl else kf for _, kf, kd in PHASES]  # each phase's record keys
        m = {label: median(rows, keys) for (label, _, _), keys in zip(PHASES, side)}
        # per epoch, then the median: the phases' medians need not sum to the epoch's
        m["other (epoch minus the phases)"] = statistics.median(
            x["epoch_s"] - sum(x[k] or 0.0 for keys in side for k in keys) for x in rows)
        m["epoch"] = median(rows, ["epoch_s"])
        if dgl:
            m["epoch_max_over_trainers"] = median(rows, ["epoch_s_max_over_trainers"])
        medians[name] = m
    # {DistDGL column: {fastsample column: DistDGL's epoch / fastsample's}}
    ratios = {d: {n: medians[d]["epoch"] / medians[n]["epoch"] for n in variants} for d in environment}
    print("\nmedians of measured epochs, rank 0, seconds ("
          + ", ".join(f"{name}: {len(rec[name])}" for name in rec) + f"); CPU {settings['cpu']}")
    pairs = [(d, n) for d in environment for n in variants]
    print("| phase | " + " | ".join(rec) + " | " + " | ".join(f"{d} / {n}" for d, n in pairs)
          + " |\n|---|" + "---:|" * (len(rec) + len(pairs)))
    first = next(iter(variants))
    for label in medians[first]:
        if label == "epoch":
            continue
        print(f"| {label} | " + " | ".join(f"{medians[n][label]:.3f}" for n in rec) + " | "
              + " | ".join(f"{medians[d][label] / medians[n][label]:.1f}x" if medians[n][label] > 0.0005 else ""
                           for d, n in pairs) + " |")
    print("| **epoch** | " + " | ".join(f"**{medians[n]['epoch']:.2f}**" + (
        f" (slowest trainer {medians[n]['epoch_max_over_trainers']:.2f})" if n in environment else "") for n in rec)
          + " | " + " | ".join(f"**{ratios[d][n]:.2f}x**" for d, n in pairs) + " |")
    like = [d for d in environment if dgl_runs[d][1] == "like"]
    headline = like[0] if like else next(iter(environment))
    result = {"settings": settings, "median": medians, "ratio": ratios[headline][first], "headline": headline,
              "ratios": ratios, "epochs": rec, "run_walls_s": walls, "foreign_cpu_s": foreign_cpu,
              "distdgl_versions": versions, "distdgl_environment": environment, "fastsample_environment": {
                  k: side_env(base, "like").get(k) for k in ("GLIBC_TUNABLES", "OMP_NUM_THREADS")},
              "fastsample_source": sources, "discarded_runs": discarded}
    if len(set(sources)) > 1:
        print(f"warning: fastsample's sources changed during the runs: {sources}")
    (out / "results.json").write_text(json.dumps(result, indent=1))
    print("CPU seconds used by other processes during the kept runs: "
          + "; ".join(f"{name} " + ", ".join(f"{x:.1f}" for x in xs) for name, xs in foreign_cpu.items())
          + f"; {len(discarded)} disturbed runs discarded")
    for name, runs in environment.items():
        print(f"{name} ({versions[name]}): " + "; ".join(f"{k}: {v}" for k, v in runs[0].items()).replace("\n", ", "))
    print("\nepoch ratio " + "; ".join(f"{d} / {n}: {ratios[d][n]:.2f}x" for d, n in pairs)
          + f"  (headline: {headline} / {first}; results: {out / 'results.json'})")


if __name__ == "__main__":
    main()
