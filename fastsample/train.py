"""python -m fastsample.train: synchronous data-parallel GraphSAGE on a partitioned graph.

Launch under mpirun / mpiexec / srun (or as one process). Each step, on every rank:
sample L layers around this rank's next training seeds (hybrid: locally on the replicated
topology; vanilla: 2 rounds per lower layer), gather the input features (2 rounds),
forward/backward, all-reduce the gradients (one flat bucket), optimizer step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from fastsample.allocator import retain_freed_memory
from fastsample.cli import Parser, agree, launch_rank
from fastsample.comm import BACKENDS, Communicator, create
from fastsample.distributed import average_gradients
from fastsample.distributed.cache import POLICIES, build_cache
from fastsample.inference import check_layerwise, layerwise
from fastsample.loader import Batch, NodeLoader
from fastsample.model import GraphSAGE
from fastsample.partition import load_partition
from fastsample.sampling import KERNELS, set_num_threads
from fastsample.sampling.rng import layer_key

# Settings every rank must share (checked at start-up); the rest may differ per rank.
SHARED = ("data", "model", "mode", "sampler", "backend", "fanouts", "batch_size", "hidden", "layers", "dropout",
          "lr", "weight_decay", "epochs", "max_steps", "seed", "eval", "eval_every", "eval_batch_size",
          "cache_fraction", "cache_policy", "prefetch", "resume", "net_model")
EVAL_SALT = 0x5EED  # eval draws its samples from a key space of its own


def build_parser() -> Parser:
    p = Parser(prog="python -m fastsample.train", description=__doc__)
    p.add_argument("--data", required=True, help="partition directory (python -m fastsample.partition)")
    p.add_argument("--model", default="sage",
                   help="sage: the built-in GraphSAGE (native kernels on the CPU); or FILE.py:FUNCTION, a factory "
                   "FUNCTION(in_dim, num_classes, args) -> torch.nn.Module whose forward(blocks, x) follows "
                   "fastsample/block.py (e.g. examples/pyg_gat.py:build)")
    p.add_argument("--mode", choices=["hybrid", "vanilla"], default="hybrid",
                   help="hybrid: topology replicated, 2 rounds per step; vanilla: topology partitioned, 2L")
    p.add_argument("--sampler", choices=[*KERNELS, "auto"], default="auto", help="hybrid mode's sampling kernel")
    p.add_argument("--backend", choices=BACKENDS, default="mpi",
                   help="collectives: mpi (mpi4py); ccl (oneCCL, an optional build: scripts/install-ccl.sh); "
                   "gloo or nccl (torch.distributed)")
    p.add_argument("--fanouts", default="15,10,5",
                   help="per layer, input layer first; -1 = all neighbours (write --fanouts=-1,-1)")
    p.add_argument("--batch-size", type=int, default=1000,
                   help="training seeds per rank per step (small graphs such as Cora want ~32-64)")
    p.add_argument("--hidden", type=int, default=256, help="width of the hidden GraphSAGE layers")
    p.add_argument("--layers", type=int, default=None, help="GNN layers (default: number of fanouts)")
    p.add_argument("--dropout", type=float, default=0.5, help="dropout probability after each hidden layer")
    p.add_argument("--lr", type=float, default=0.006, help="Adam's learning rate")
    p.add_argument("--weight-decay", type=float, default=0.0, help="Adam's L2 penalty")
    p.add_argument("--epochs", type=int, default=10, help="epochs to train (with --resume: in all)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="cap the steps per epoch (timing runs on large graphs); default: a full epoch")
    p.add_argument("--seed", type=int, default=0,
                   help="fixes initial weights, sampling, shuffling and dropout: runs with the same seed "
                   "give the same losses")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model runs; sampling and the gather stay on the CPU")
    p.add_argument("--eval-every", type=int, default=1, help="evaluate val/test every N epochs (0: never)")
    p.add_argument("--eval", choices=["sampled", "full"], default="sampled",
                   help="sampled: val/test nodes with the training fanouts (fast, noisy); full: exact "
                   "layer-wise inference over every node with all neighbours (fastsample/inference.py)")
    p.add_argument("--eval-batch-size", type=int, default=4096, help="nodes per rank per batch of --eval full")
    p.add_argument("--cache-fraction", type=float, default=0.0,
                   help="every rank keeps a copy of the features of this fraction of all nodes, those it "
                   "would fetch most from other ranks; the gather then sends fewer bytes (same results)")
    p.add_argument("--cache-policy", choices=POLICIES, default="frequency",
                   help="which rows to cache: frequency (input nodes of this rank's first epoch of batches, "
                   "pre-sampled) or degree (most out-edges); see fastsample/distributed/cache.py")
    p.add_argument("--prefetch", type=int, default=0, metavar="DEPTH",
                   help="sample and gather up to DEPTH steps ahead in a background thread while the model "
                   "computes (same results; pays when the gather waits on the network, see bench/README.md); "
                   "0: off")
    p.add_argument("--checkpoint-dir", help="save model and optimizer after every epoch (rank 0)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --checkpoint-dir")
    p.add_argument("--log-json", help="rank 0 appends one JSON object per epoch to this file (its "
                   "directory must exist)")
    p.add_argument("--net-model", metavar="LATENCY_US,GBPS",
                   help="add a modelled network's cost to every collective (benchmarks on one machine; "
                   "see fastsample/comm/netmodel.py), e.g. 10,25")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per rank for the model and the samplers (default: OMP_NUM_THREADS or all cores)")
    p.add_argument("--allocator", choices=["retain", "system"], default="retain",
                   help="retain: keep freed memory mapped for reuse (no per-step page faults; the process "
                   "keeps its peak heap; see fastsample/allocator.py); system: malloc's defaults")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (it is shown only when stderr is a terminal anyway)")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    try:
        args.fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        p.error(f"--fanouts: expected comma-separated integers (got {args.fanouts!r})")
    if args.layers is None:
        args.layers = len(args.fanouts)
    if args.net_model:
        try:
            args.net_model = [float(v) for v in args.net_model.split(",")]
        except ValueError:
            args.net_model = None
        if args.net_model is None or len(args.net_model) != 2:
            p.error("--net-model: expected LATENCY_US,GBPS, e.g. 10,25")
    checks = [(args.layers == len(args.fanouts), f"--layers {args.layers} needs {args.layers} fanouts, got {args.fanouts}"),
              (all(f == -1 or f > 0 for f in args.fanouts), f"--fanouts must be positive or -1 (got {args.fanouts})"),
              (args.batch_size > 0, f"--batch-size must be positive (got {args.batch_size})"),
              (args.epochs > 0, f"--epochs must be positive (got {args.epochs})"),
              (args.threads is None or args.threads > 0, f"--threads must be positive (got {args.threads})"),
              (args.eval_every >= 0, f"--eval-every must be >= 0 (got {args.eval_every})"),
              (args.eval_batch_size > 0, f"--eval-batch-size must be positive (got {args.eval_batch_size})"),
              (0 <= args.prefetch <= 8, f"--prefetch must be in 0..8 (got {args.prefetch})"),
              (0 <= args.cache_fraction < 1, f"--cache-fraction must be in [0, 1) (got {args.cache_fraction})"),
              (0 <= args.dropout < 1, f"--dropout must be in [0, 1) (got {args.dropout})"),
              (not args.resume or args.checkpoint_dir, "--resume needs --checkpoint-dir")]
    for ok, msg in checks:
        if not ok:
            p.error(msg)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error(f"--device cuda: no CUDA device is available (torch {torch.__version__}, "
                f"{'built without CUDA' if torch.version.cuda is None else f'CUDA {torch.version.cuda}'})")
    return args


def _atomic_save(obj, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, device) -> dict:
    """A checkpoint, read with torch's weights-only unpickler: tensors and plain values
    only, so a tampered file cannot run code. Anything else is one ValueError naming it."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        why = next((line for line in lines if "GLOBAL" in line or "Unsupported global" in line), lines[0])
        raise ValueError(f"{path}: refused: not a plain checkpoint of tensors and values ({why})") from None
    if not isinstance(state, dict) or not {"epoch", "model", "optimizer", "config"} <= state.keys():
        raise ValueError(f"{path}: not a fastsample checkpoint (expected epoch, model, optimizer, config)")
    return state


def make_model(args, in_dim: int, num_classes: int) -> torch.nn.Module:
    """The model the settings name (--model; a checkpoint's config holds the same fields)."""
    if args.model == "sage":
        return GraphSAGE(in_dim, args.hidden, num_classes, args.layers, args.dropout)
    model = load_factory(args.model)(in_dim, num_classes, args)
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"--model {args.model}: returned {type(model).__name__}, not a torch.nn.Module")
    return model


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load_factory(spec: str):
    """FILE.py:FUNCTION -> the function (a user's model factory)."""
    import importlib.util

    file, _, name = spec.rpartition(":")
    if not file or not name:
        raise ValueError(f"--model {spec}: expected sage or FILE.py:FUNCTION")
    path = Path(file)
    if not path.is_file():
        raise FileNotFoundError(f"--model {spec}: {path} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"fastsample_user_model_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise ValueError(f"--model {spec}: importing {path} failed ({type(e).__name__}: {e})") from e
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"--model {spec}: {path} defines no function {name!r}")
    return factory


def check_outputs(args) -> None:
    """Rank 0 writes the log and the checkpoints: check both places before any work, so a
    bad path is a start-up error, not a crash after the first epoch."""
    if args.log_json:
        log = Path(args.log_json)
        if not log.parent.is_dir():
            raise FileNotFoundError(f"--log-json {log}: directory {log.parent} does not exist")
        if log.is_dir() or not os.access(log if log.exists() else log.parent, os.W_OK):
            raise PermissionError(f"--log-json {log}: cannot write there")
    if args.checkpoint_dir:
        ckpt = Path(args.checkpoint_dir)
        if args.resume:  # read, never created
            if not ckpt.is_dir():
                raise FileNotFoundError(f"--resume: checkpoint directory {ckpt} does not exist")
            return
        try:
            ckpt.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(f"--checkpoint-dir {ckpt}: cannot create it ({e.strerror})") from None
        if not os.access(ckpt, os.W_OK):
            raise PermissionError(f"--checkpoint-dir {ckpt}: cannot write there")


def seconds(t: float) -> str:
    """A duration with sensible precision: 3.2ms, 640ms, 12.34s."""
    return f"{t * 1e3:.1f}ms" if t < 0.01 else f"{t * 1e3:.0f}ms" if t < 1 else f"{t:.2f}s"


class Trainer:
    """Holds every component; built in order by __init__, run by run()."""

    comm: Communicator
    shard: object  # RankPartition
    loaders: dict[str, NodeLoader]  # train, val, test
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    steps_per_epoch: int
    start_epoch: int

    def __init__(self, args: argparse.Namespace, comm: Communicator):
        self.args, self.comm, self.rank = args, comm, comm.rank
        self.device = torch.device(args.device)
        self.build_data()
        self.build_model()
        self.build_checkpoint()

    # ---------------------------------------------------------------- building

    def build_data(self) -> None:
        a = self.args
        self.shard = load_partition(a.data, self.rank, self.comm.size, mode=a.mode)
        self.num_classes = self.shard.meta["dataset"]["num_classes"]
        common = dict(comm=self.comm, kernel=a.sampler, mode=a.mode, device=self.device, prefetch=a.prefetch)
        self.loaders = {"train": NodeLoader(self.shard, a.fanouts, a.batch_size, "train", shuffle=True, seed=a.seed,
                                            max_steps=a.max_steps, **common)}
        for split in ("val", "test"):  # eval draws its samples from a key space of its own
            self.loaders[split] = NodeLoader(self.shard, a.fanouts, a.batch_size, split, shuffle=False,
                                             seed=a.seed + EVAL_SALT, **common)
        self.kernel = self.loaders["train"].kernel
        self.steps_per_epoch = len(self.loaders["train"])
        if a.cache_fraction:  # checked here, before the collective build in run()
            f = self.shard.features
            need = int(a.cache_fraction * self.shard.num_nodes) * f.shape[1] * f.dtype.itemsize
            available = available_memory()
            if available is not None and need > available // 2:
                raise ValueError(f"--cache-fraction {a.cache_fraction}: the cache needs {need / 2**20:,.0f} MiB per "
                                 f"rank, over half of the {available / 2**20:,.0f} MiB available; lower it")

    def build_model(self) -> None:
        a = self.args
        torch.manual_seed(a.seed)  # identical initial weights on every rank
        self.model = make_model(a, self.shard.features.shape[1], self.num_classes).to(self.device)
        if a.eval == "full":
            check_layerwise(self.model)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=a.lr, weight_decay=a.weight_decay)

    def build_checkpoint(self) -> None:
        a = self.args
        self.start_epoch = 0
        if not a.checkpoint_dir:
            return
        self.ckpt_dir = Path(a.checkpoint_dir)
        if a.resume:
            found = sorted(self.ckpt_dir.glob("epoch-*.pt"), key=lambda f: int(f.stem.split("-")[1]))
            if not found:
                raise FileNotFoundError(f"--resume: no checkpoint (epoch-*.pt) in {self.ckpt_dir}")
            state = load_checkpoint(found[-1], self.device)
            mismatched = [k for k in ("model", "fanouts", "hidden", "layers", "mode", "seed", "batch_size")
                          if state["config"].get(k) != vars(a)[k]]
            if mismatched:
                raise ValueError(f"{found[-1]}: saved with different {', '.join(mismatched)}")
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.start_epoch = state["epoch"] + 1
            if self.start_epoch >= a.epochs:
                raise ValueError(f"--resume: {found[-1].name} already ends epoch {state['epoch']}; "
                                 f"--epochs {a.epochs} leaves nothing to train (raise --epochs)")

    # ---------------------------------------------------------------- one step

    def train_step(self, batch: Batch, epoch: int, step: int, timers: dict) -> tuple[float, float, float]:
        """Returns this step's global (loss sum, correct, count) over all ranks."""
        a = self.args
        t0 = time.perf_counter()
        # dropout masks from the step's own seed: reproducible across modes, and on resume
        torch.manual_seed(layer_key(a.seed, epoch, step, self.rank, 0) & 0x7FFFFFFFFFFFFFFF)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        logits = self.model(batch.blocks, batch.x)
        if len(batch):
            loss = torch.nn.functional.cross_entropy(logits, batch.y)
            loss.backward()
            stats = [loss.detach().item() * len(batch), float((logits.argmax(1) == batch.y).sum()), len(batch)]
        else:
            stats = [0.0, 0.0, 0.0]
        t1 = time.perf_counter()
        # one bucket: gradients and the step's loss statistics
        totals = average_gradients(self.model, self.comm, extra=stats)
        self.optimizer.step()
        t2 = time.perf_counter()
        for key, dt in (("sample_s", batch.sample_s), ("gather_s", batch.gather_s), ("wait_s", batch.wait_s),
                        ("compute_s", t1 - t0), ("allreduce_s", t2 - t1)):
            timers[key] += dt
        return tuple(float(v) for v in totals)

    @torch.no_grad()
    def evaluate(self, split: str, epoch: int) -> float:
        self.model.eval()
        loader = self.loaders[split]
        loader.set_epoch(epoch)
        stats = np.zeros(2)
        for batch in loader:
            if len(batch):
                pred = self.model(batch.blocks, batch.x).argmax(1)
                stats += [int((pred == batch.y).sum()), len(batch)]
        self.comm.all_reduce(stats)
        return float(stats[0] / max(stats[1], 1))

    def evaluate_full(self) -> tuple[float, float]:
        """Validation and test accuracy from exact layer-wise inference (one pass for both)."""
        out = layerwise(self.model, self.shard, self.comm, self.args.eval_batch_size, self.device,
                        progress=not self.args.quiet)
        pred, lo = out.argmax(1), int(self.shard.offsets[self.rank])
        stats = np.zeros(4)
        for k, split in enumerate(("val", "test")):
            ids = np.asarray(getattr(self.shard, split)) - lo
            stats[2 * k:2 * k + 2] = [(pred[ids] == self.shard.labels[ids]).sum(), len(ids)]
        self.comm.all_reduce(stats)
        return float(stats[0] / max(stats[1], 1)), float(stats[2] / max(stats[3], 1))

    # ---------------------------------------------------------------- the run

    def run(self) -> list[dict]:
        a, comm = self.args, self.comm
        lead = self.rank == 0
        # Warm-up (loads the Numba kernels, touches the maps) before anything is timed. It
        # is here, after start-up's agreement, because vanilla sampling is collective: in
        # the constructor, a rank that failed to load would leave the others waiting in it.
        self.loaders["train"].warm_up()
        if a.cache_fraction:
            t0 = time.perf_counter()
            cache = build_cache(self.loaders["train"], a.cache_fraction, a.cache_policy)
            for loader in self.loaders.values():
                loader.gather.cache = cache
            sizes = comm.allgather_object(cache.nbytes)
            if lead:
                print(f"fastsample.train: feature cache ({a.cache_policy}): {len(cache.ids):,} rows, "
                      f"{max(sizes) / 2**20:.1f} MiB per rank at most, built in {seconds(time.perf_counter() - t0)}",
                      flush=True)
        if lead:
            meta = self.shard.meta
            print(f"fastsample.train: {meta['dataset']['name']} ({meta['dataset']['num_nodes']:,} nodes), "
                  f"{comm.size} ranks x {torch.get_num_threads()} threads, mode {a.mode}, sampler "
                  f"{self.kernel if a.mode == 'hybrid' else 'vanilla (numba)'}, backend {comm.name}, fanouts "
                  f"{a.fanouts}, batch {a.batch_size}/rank ({a.batch_size * comm.size} global), "
                  f"{self.steps_per_epoch} steps/epoch, epochs {self.start_epoch}..{a.epochs - 1}", flush=True)
            if self.steps_per_epoch == 1 and a.max_steps is None:
                most = max(p["train"] for p in meta["parts"])
                print(f"fastsample.train: warning: an epoch is a single step (at most {most:,} training nodes "
                      f"per rank, --batch-size {a.batch_size}); the model gets one update per epoch. Use a "
                      "smaller --batch-size on small graphs (e.g. 32-64 for Cora).", file=sys.stderr, flush=True)
        history = []
        loader = self.loaders["train"]
        for epoch in range(self.start_epoch, a.epochs):
            t_epoch = time.perf_counter()
            timers = dict.fromkeys(("sample_s", "gather_s", "wait_s", "compute_s", "allreduce_s"), 0.0)
            comm.counters.reset()
            loader.set_epoch(epoch)
            rows_before = (loader.gather.rows_cached, loader.gather.rows_remote)
            losses, totals = [], np.zeros(3)
            # a bar only on a terminal: in a file (a Slurm log) its redraws are noise
            steps = tqdm(loader, desc=f"epoch {epoch}", leave=False,
                         disable=not lead or a.quiet or not sys.stderr.isatty())
            for step, batch in enumerate(steps):
                loss_sum, correct, count = self.train_step(batch, epoch, step, timers)
                losses.append(loss_sum / max(count, 1))
                totals += (loss_sum, correct, count)
                steps.set_postfix(loss=f"{losses[-1]:.4f}")
            traffic = comm.counters.reset()
            record = {"epoch": epoch, "loss": totals[0] / max(totals[2], 1),
                      "train_acc": totals[1] / max(totals[2], 1), "val_acc": None, "test_acc": None,
                      "epoch_s": time.perf_counter() - t_epoch, **timers,
                      "bytes_sent": traffic.bytes_sent, "rounds_per_step": traffic.rounds / max(self.steps_per_epoch, 1),
                      "net_modelled_s": traffic.modelled_s if a.net_model else None, "step_losses": losses,
                      "cache_hit_rate": self.hit_rate(rows_before) if a.cache_fraction else None}
            if a.eval_every and (epoch + 1) % a.eval_every == 0:
                if a.eval == "full":
                    record["val_acc"], record["test_acc"] = self.evaluate_full()
                else:
                    record["val_acc"] = self.evaluate("val", epoch)
                    record["test_acc"] = self.evaluate("test", epoch)
            self.save_checkpoint(epoch)
            history.append(record)
            if lead:
                self.report(record)
        if lead and history:
            print(summary(history), flush=True)
        return history

    def hit_rate(self, before: tuple[int, int]) -> float:
        """Of the rows rank 0 needed from other ranks this epoch, the share its cache held."""
        g = self.loaders["train"].gather
        cached, remote = g.rows_cached - before[0], g.rows_remote - before[1]
        return cached / max(cached + remote, 1)

    def save_checkpoint(self, epoch: int) -> None:
        if self.args.checkpoint_dir and self.rank == 0:
            _atomic_save({"epoch": epoch, "model": self.model.state_dict(),
                          "optimizer": self.optimizer.state_dict(), "config": vars(self.args)},
                         self.ckpt_dir / f"epoch-{epoch}.pt")

    def report(self, r: dict) -> None:
        acc = "" if r["val_acc"] is None else f" val {r['val_acc']:.4f} test {r['test_acc']:.4f}"
        tqdm.write(f"epoch {r['epoch']:3d}  loss {r['loss']:.4f}  train {r['train_acc']:.4f}{acc}  "
                   f"{seconds(r['epoch_s'])} (sample {seconds(r['sample_s'])} gather {seconds(r['gather_s'])} "
                   + (f"(waited {seconds(r['wait_s'])}) " if self.args.prefetch else "") +
                   f"compute {seconds(r['compute_s'])} allreduce {seconds(r['allreduce_s'])})  "
                   f"sent {r['bytes_sent'] / 2**20:.1f} MiB (rank 0, this epoch)  "
                   + (f"cache hits {r['cache_hit_rate']:.1%}  " if r["cache_hit_rate"] is not None else "") +
                   f"{r['rounds_per_step']:.0f} rounds/step")
        if self.args.log_json:
            with open(self.args.log_json, "a") as f:
                f.write(json.dumps(r) + "\n")


def summary(history: list[dict]) -> str:
    """One closing line: best validation accuracy, the test accuracy at that epoch, mean epoch time."""
    mean = seconds(sum(r["epoch_s"] for r in history) / len(history))
    span = f"epochs {history[0]['epoch']}..{history[-1]['epoch']}"
    evaluated = [r for r in history if r["val_acc"] is not None]
    if not evaluated:
        return f"done: {span}, mean epoch {mean}, no evaluation (--eval-every 0)"
    best = max(evaluated, key=lambda r: r["val_acc"])  # the first epoch that reached it
    return (f"done: {span}, best val {best['val_acc']:.4f} at epoch {best['epoch']} (test there "
            f"{best['test_acc']:.4f}), mean epoch {mean}")


def startup(args, comm: Communicator) -> Trainer:
    """Build the trainer on every rank; a failure on any rank (bad partition, mismatched
    settings, missing file) stops all of them with its message (cli.agree)."""

    def build():
        settings = {k: vars(args)[k] for k in SHARED}
        everyone = comm.allgather_object(settings)
        differ = sorted({k for s in everyone for k in SHARED if s[k] != everyone[0][k]})
        if differ:
            raise ValueError(f"ranks were started with different {', '.join(differ)}")
        if args.threads:  # every pool: torch's, and the samplers' (OpenMP, Numba)
            torch.set_num_threads(args.threads)
            set_num_threads(args.threads)
        if comm.rank == 0:
            check_outputs(args)
        return Trainer(args, comm)

    return agree(comm, "python -m fastsample.train", build)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.allocator == "retain":
        retain_freed_memory()
    try:
        comm = create(args.backend)
    except RuntimeError as e:  # a backend that is not installed: the same on every rank, so one says it
        if launch_rank() == 0:
            print(f"python -m fastsample.train: error: {e}", file=sys.stderr, flush=True)
        return 2
    if args.net_model:
        from fastsample.comm.netmodel import ModeledNetwork

        comm = ModeledNetwork(comm, *args.net_model)
    trainer = startup(args, comm)
    try:
        trainer.run()
    except Exception:
        # A rank that fails mid-run would leave the others blocked in a collective: say why,
        # then end the whole job.
        sys.stderr.write(f"rank {comm.rank}: error during training:\n{traceback.format_exc()}")
        sys.stderr.flush()
        if comm.size > 1:
            comm.abort(1)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
