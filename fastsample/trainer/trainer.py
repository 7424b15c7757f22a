"""The Trainer: synchronous data-parallel training of a GNN on a partitioned graph.

Each step, on every rank: the loader samples L layers around the rank's next training
seeds (hybrid: locally; vanilla: 2 rounds per lower layer) and gathers the input features
(2 rounds); forward and backward; one all-reduce of the gradients (one flat bucket) and
the step's loss statistics; the optimizer step. Model, optimizer and loss are objects
the caller may pass (defaults: the built-in GraphSAGE, Adam, cross-entropy). Typed data
with featureless node types adds their sharded embeddings (fastsample/distributed/
embedding.py): rows gathered with the features, gradients sent back to the owners in one
more all_to_all after the optimizer step, updated sparsely. Checkpoints
(checkpoint.py), epoch records (metrics.py) and where reports go (report.py) are
components of their own.
"""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils._pytree import tree_map  # one map over a tensor or {node type: tensor}

from fastsample.nn import matmul
from fastsample.phases import AFTER_STEPS, in_phase, phase, position
from fastsample.nn.roofline import Roofline
from fastsample.comm import Communicator
from fastsample.comm.agree import agree
from fastsample.options import ConfigError, marked
from fastsample.distributed import average_gradients
from fastsample.distributed.embedding import ShardedEmbeddings
from fastsample.data.graph import NODE, describe_types, unreached_types, unwrap_one_type
from fastsample.loading import Batch, open_data
from fastsample.trainer.adam import Adam
from fastsample.nn.models import build_encoder
from fastsample.sampling import fanout_matrix, layer_key, set_num_threads
from fastsample.launcher import default_threads
from fastsample.tasks import task_for
from fastsample.trainer.checkpoint import CheckpointError, Checkpoints
from fastsample.trainer.config import TrainConfig, layer_fanouts
from fastsample.trainer.metrics import TIMERS, EpochRecord, seconds
from fastsample.trainer import runlog
from fastsample.trainer.runlog import append_log
from fastsample.trainer.report import ConsoleReporter, Reporter, Reporters, TensorBoardReporter
from fastsample.trainer.schedule import lr_factor

__all__ = ["Trainer", "NonFiniteLoss", "Preempted", "TargetMissed", "build_model", "startup"]


class NonFiniteLoss(RuntimeError):
    """A step's loss was NaN or infinite on some rank (raised on every rank alike)."""


class TargetMissed(RuntimeError):
    """The run ended without reaching --target-val-acc (raised on every rank alike)."""


PREEMPTED = 75  # EX_TEMPFAIL: stopped by a signal, state saved; rerun with --resume (train.sbatch requeues it)


class Preempted(RuntimeError):
    """A stop was asked for (request_stop: SIGTERM, SIGUSR1) on some rank; every rank ended
    the same step, the state was saved to resume at the next one (raised on every rank alike).
    ``status``: the exit status, 75 where a checkpoint holds the state (rerun with --resume),
    else 128 + the signal (nothing to resume: a requeue would start over)."""

    def __init__(self, text: str, status: int):
        super().__init__(text)
        self.status = status


def build_model(config: TrainConfig, in_dim, num_classes: int, schema: dict | None = None) -> torch.nn.Module:
    """The model of ``config``: the network its --model names (fastsample/nn/models.py), the
    width and output type its task chooses for ``num_classes`` (of the labels the task
    trains on: task.classes), inside the task's head (--task link: a
    LinkModel whose encoder has ``config.hidden`` outputs, the embeddings).

    Typed data (``schema``: typed_schema's) has ``in_dim`` {node type: input width (a
    featureless type's: its embeddings', config.embed_dim)}; a user's factory is called
    with that dict as its in_dim."""
    task = task_for(config)
    target = task.encoder_target(schema["target_type"] if schema is not None else NODE)
    edge_types = schema["edge_types"] if schema is not None else None
    encoder = build_encoder(config.model, in_dim, task.out_width(num_classes), edge_types, target, config)
    return task.head(encoder, num_classes)


def model_for(config: TrainConfig, shard) -> torch.nn.Module:
    """build_model for ``shard``'s data (a partition or dataset): its feature width and
    classes, or on typed data each node type's width (a featureless type's: its embeddings')."""
    in_dims = {t: config.embed_dim if f is None else int(f.shape[1]) for t, f in shard.shards.items()}
    return build_model(config, unwrap_one_type(in_dims), task_for(config).classes(shard), typed_schema(shard))


def embeddings_for(config: TrainConfig, shard, rank: int, num_parts: int) -> ShardedEmbeddings | None:
    """This rank's learnable embedding tables of typed data's featureless node types
    (fastsample/distributed/embedding.py); None where every type has features."""
    featureless = [t for t, f in shard.shards.items() if f is None]
    if not featureless:
        return None
    return ShardedEmbeddings(shard.layout["type_runs"], rank, num_parts, shard.meta["node_types"], featureless,
                             config.embed_dim, config.embed_lr, config.seed, order=node_order(shard, featureless))


def node_order(shard, node_types) -> str:
    """A digest of which dataset node each row of ``node_types`` is, over every rank's rows
    (the partition's orig_ids): equal for two partitions only where those rows agree."""
    import hashlib

    from fastsample.export import orig_ids

    names, runs = list(shard.meta["node_types"]), np.asarray(shard.layout["type_runs"], dtype=np.int64)
    orig, T, digest = orig_ids(shard, shard.path), len(names), hashlib.blake2b(digest_size=16)
    for r in range((len(runs) - 1) // T):
        for t in node_types:
            i = r * T + names.index(t)
            digest.update(np.ascontiguousarray(orig[runs[i]:runs[i + 1]], dtype=np.int64).tobytes())
    return digest.hexdigest()


def typed_schema(shard) -> dict | None:
    """What the R-GCN needs of typed data: its edge types and target type; None for the
    one-type case (no target type), which gets GraphSAGE."""
    types = describe_types(shard.meta)
    return types["target_type"] and {"edge_types": types["edge_types"], "target_type": types["target_type"]}


def _writable_directory(setting: str, path: Path) -> None:
    """``path`` made if missing, and writable, else a ConfigError naming ``setting``."""
    if path.exists() and not path.is_dir():
        raise ConfigError(setting, f"{path}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(setting, f"{path}: cannot create it ({e.strerror})") from None
    if not os.access(path, os.W_OK):
        raise ConfigError(setting, f"{path}: cannot write there")


def check_outputs(config: TrainConfig) -> bool:
    """Rank 0 writes the log, the TensorBoard events and the checkpoints: check those places before any work, so a
    bad path is a start-up error (a ConfigError naming the setting), not a crash after the
    first epoch. Then lock the checkpoint directory (checkpoint.lock_directory): a second
    job writing it fails here (fastsample.atomic.Busy naming the first's process), and this
    process holds it until its rank-0 Checkpoints is gone or it ends. Returns whether it
    created the checkpoint directory (a start-up that fails later removes it again)."""
    if config.log_json:
        log = Path(config.log_json)
        if not log.parent.is_dir():
            raise ConfigError("log_json", f"{log}: directory {log.parent} does not exist")
        if log.is_dir() or not os.access(log if log.exists() else log.parent, os.W_OK):
            raise ConfigError("log_json", f"{log}: cannot write there")
        if log.is_file():  # this run goes after the runs there: they must be a log's
            try:
                runlog.read_runs(log)
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError("log_json", f"{log}: holds something else than a --log-json file's runs ({e})") from None
    if config.tensorboard:
        board = Path(config.tensorboard)
        if importlib.util.find_spec("tensorboard") is None:
            raise ConfigError("tensorboard", f"{board}: needs the tensorboard package (pip install "
                                             "'fastsample[tensorboard]', or pip install tensorboard)")
        _writable_directory("tensorboard", board)
    if config.checkpoint_dir:
        ckpt = Path(config.checkpoint_dir)
        if config.resume and not ckpt.is_dir():  # read, never created
            raise ConfigError("resume", f": checkpoint directory {ckpt} does not exist")
        created = not ckpt.exists()
        _writable_directory("checkpoint_dir", ckpt)
        from fastsample.trainer.checkpoint import lock_directory

        try:
            lock_directory(ckpt)
        except PermissionError:
            raise ConfigError("checkpoint_dir", f"{ckpt}: cannot write there") from None
        return created
    return False


class Trainer:
    """Holds every component; built in order by __init__, run by run().

    Args:
        config: the settings.
        comm: the job's communicator.
        model: the network (default: build_model(config, ...)); every rank must start from
            the same weights (the default seeds torch with config.seed first).
        optimizer: an optimizer over model's parameters, or a function params -> optimizer
            (default: Adam with config.lr and config.weight_decay).
        loss: loss(logits, labels) -> scalar tensor, the mean over the batch (default: cross-entropy).
        reporter: where rank 0's reports go (fastsample/trainer/report.py; default: the
            console's lines, as python -m fastsample.train prints them).
    """

    def __init__(self, config: TrainConfig, comm: Communicator, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | Callable | None = None, loss: Callable | None = None,
                 reporter: Reporter | None = None):
        self.config, self.comm, self.rank = config, comm, comm.rank
        self.device = torch.device(config.device)
        self.reporter = reporter if reporter is not None else ConsoleReporter(config.quiet, bool(config.prefetch),
                                                                                 config.progress, config.progress_every)
        self.task = task_for(config)
        with phase("read"):
            self._open_data()
        self._set_model(model, optimizer)
        self.loss = loss if loss is not None else self.task.default_loss()
        self.checkpoints = (Checkpoints(config.checkpoint_dir, config, self.shard.meta) if config.checkpoint_dir
                            else None)
        self.start_epoch, self.start_step, self.resumed = 0, 0, None
        self.stop_signal = 0  # set by request_stop (a signal handler); acted on at the end of a step
        self.stop_agreed = 0  # how many ranks asked to stop, as of the last step
        if config.resume:
            built = [{k: g[k] for k in ("lr", "weight_decay") if k in g} for g in self.optimizer.param_groups]
            self.start_epoch, self.start_step, self.resumed = self.checkpoints.resume(
                self.model, self.optimizer, self.device, self.embeddings, self.rank, comm.size, self.steps_per_epoch)
            # Adam's moments and steps are the checkpoint's; its rate and decay this run's (--lr and
            # --weight-decay may change on a resume: the loaded state would silently keep the old ones)
            for g, settings in zip(self.optimizer.param_groups, built):
                g.update(settings)
        # --early-stop's best score, its epoch, and the evaluations since (saved with every checkpoint)
        self.early = dict(self.checkpoints.progress.get("early_stop", {})) if self.checkpoints is not None else {}
        if self.early:
            self.checkpoints.kept = {f"epoch-{self.early['epoch']}.pt"}
            if config.early_stop is not None and self.early["stale"] >= config.early_stop:
                raise CheckpointError(f"resume: the run stopped early after epoch {self.start_epoch - 1} (no better "
                                      f"score than epoch {self.early['epoch']}'s for {self.early['stale']} evaluations, "
                                      f"--early-stop {config.early_stop}): raise --early-stop to train on")
        # the run's identity in the --log-json file: a resumed run goes on under its own
        progress = self.checkpoints.progress if self.checkpoints is not None else {}
        self.run_id = progress.get("run_id") if self.resumed else None
        self.run_id = self.run_id or runlog.new_run_id()
        progress["run_id"] = self.run_id
        # the best evaluated epoch before a resume: the closing line weighs it with this run's
        self.best_before = progress.get("best") if self.resumed else None
        if config.tensorboard:  # beside the console's (or the caller's) reports
            self.reporter = Reporters(self.reporter, TensorBoardReporter(
                config.tensorboard, self.run_id, self.start_epoch * self.steps_per_epoch + self.start_step))

    def request_stop(self, signum: int) -> None:
        """Stop after the current step on every rank, saving where to resume (Preempted).
        Safe to call from a signal handler on any one rank: the ranks agree at the step's end."""
        self.stop_signal = int(signum) or 1

    # ---------------------------------------------------------------- building

    def _open_data(self) -> None:
        c = self.config
        # a partition, or a dataset for one process; bf16 and int8 narrow or quantize the shards
        # into memory themselves, once, for every loader
        self.shard = open_data(c.data, self.comm, c.mode, c.precision)
        starved = set(unreached_types(self.shard.meta))
        unreached = [t for t in self.task.read_types(self.shard) if t in starved]
        if unreached:
            raise ValueError(f"{c.data}: node type {unreached[0]} is no relation's destination, so the model's rows "
                             f"for it get no messages (--task {self.task.name} reads them): give the graph a relation "
                             "into it (a reverse relation: the tables spec's reverse)")
        self.num_classes = self.shard.num_classes
        self.embeddings = embeddings_for(c, self.shard, self.rank, self.comm.size)
        common = dict(comm=self.comm, kernel=c.sampler, mode=c.mode, device=self.device, prefetch=c.prefetch,
                      precision=c.precision, embeddings=self.embeddings)
        fanouts = layer_fanouts(c)
        if c.relation_fanouts is not None:  # checked now, a start-up error, against the graph's relations
            topology = self.shard.graph if self.shard.graph is not None else self.shard.local_graph
            try:
                fanout_matrix(topology, fanouts)
            except ValueError as e:
                raise ConfigError("relation_fanouts", ": " + str(e).removeprefix("fanouts: ")) from None
        self.loaders = self.task.loaders(self.shard, fanouts, common)
        self.steps_per_epoch = len(self.loaders["train"])
        if not self.steps_per_epoch:
            raise ValueError(f"{c.data}: the train split is empty ({self.task.name}): nothing to train on")

    def _set_model(self, model, optimizer) -> None:
        c = self.config
        if model is None:
            torch.manual_seed(c.seed)  # identical initial weights on every rank
            model = model_for(c, self.shard)
        self.model = model.to(self.device)
        self.roofline = Roofline(self.model, self.device)
        self.task.check_model(self.model)
        self.task.width = self.task.out_width(self.task.classes(self.shard))  # what each step's output must be
        self._check_same_weights()
        if optimizer is None:
            optimizer = Adam(self.model.parameters(), lr=c.lr, weight_decay=c.weight_decay)  # torch's, started faster
        elif not isinstance(optimizer, torch.optim.Optimizer):
            optimizer = optimizer(self.model.parameters())
        self.optimizer = optimizer
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]  # what --lr-schedule scales (before a resume)

    def _check_same_weights(self) -> None:
        """Every rank starts from the same weights: a model built on each rank without one
        seed (torch.manual_seed before it) trained each rank's own replica, the gradients
        averaged over unlike models, silently. Collective; a ValueError on every rank alike."""
        import hashlib

        digest = hashlib.sha1()
        for name, p in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(p.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        seen = self.comm.allgather_object(digest.hexdigest())
        if len(set(seen)) > 1:
            other = next(r for r, d in enumerate(seen) if d != seen[0])
            raise ValueError(f"the model's initial weights differ between rank 0 and rank {other}: build it after "
                             "the same torch.manual_seed on every rank (the trainer's own models are)")

    def choose_matmul(self) -> None:
        """The product engines (fastsample/nn/matmul.py) of a model that says its widest product
        (``product_shape``, as the built-in models do): decided on rank 0, used by all."""
        c = self.config
        shape_of = getattr(self.model, "product_shape", None)
        rows = c.batch_size * math.prod(f if f > 0 else 64 for f in c.fanouts[1:])  # layer 1's destinations
        shape = shape_of(min(rows, 4096)) if shape_of is not None and self.device.type == "cpu" else None
        if shape is None:  # a user's model, or off the CPU: torch's products as they come
            model = getattr(self.model, "encoder", self.model)
            self.matmul_note = (f"torch's ({type(model).__name__} chooses no engine; --matmul serves the built-in "
                                "models on the CPU)")
            if c.matmul != "auto" and self.rank == 0:
                self.reporter.warn(f"fastsample.train: warning: --matmul {c.matmul} has no effect on "
                                   f"{type(model).__name__}" + (" off the CPU" if self.device.type != "cpu" else ""))
            return
        plan, source = matmul.plan_for(c.matmul, c.precision, shape) if self.rank == 0 else (None, None)
        plan, source = self.comm.broadcast_object((plan, source))
        matmul.use(plan)
        self.matmul_note = f"{plan.describe(figures=False)} ({source})"

    def input(self, batch: Batch) -> torch.Tensor:
        """The input rows for the model: row tables as they are to a model that reads them
        (``reads_row_tables``: the built-in GraphSAGE and R-GCN read the rows where the gather
        found them; learnable rows too where it reads those, ``reads_learnable_rows``, as the
        R-GCN), else batch.x; 16-bit features as they are to a model that reads them
        (``reads_16bit_input``, as the built-in GraphSAGE), widened for any other."""
        if not getattr(self.model, "reads_row_tables", False):
            x = batch.x
        else:
            x = batch.inputs if getattr(self.model, "reads_learnable_rows", False) else batch.learnable_as_leaves()
        if getattr(self.model, "reads_16bit_input", False):
            return x
        return tree_map(lambda v: v if not isinstance(v, torch.Tensor) or v.dtype == torch.float32 else v.float(), x)

    # ---------------------------------------------------------------- one step

    def train_step(self, batch: Batch, epoch: int, step: int, timers: dict) -> tuple[float, float, float]:
        """Returns this step's global (loss sum, the task's train metric summed, count) over all ranks."""
        t0 = time.perf_counter()
        # dropout masks from the step's own seed: reproducible across modes, and on resume
        torch.manual_seed(layer_key(self.config.seed, epoch, step, self.rank, 0) & 0x7FFFFFFFFFFFFFFF)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        with phase("forward"):
            loss, stats = self.task.step(self.model, batch, self.input(batch), self.loss)
            self.roofline.count(batch.blocks, batch)
            if loss is not None:
                loss.backward()
        t1 = time.perf_counter()
        # one bucket: gradients, the step's loss statistics, and which ranks' losses are not finite
        flags = np.zeros(self.comm.size + 1)
        flags[self.rank] = not math.isfinite(stats[0])
        flags[-1] = bool(self.stop_signal)  # asked to stop on this rank
        with phase("allreduce"):
            totals = average_gradients(self.model, self.comm, extra=[*stats, *flags])
        bad = np.flatnonzero(totals[3:-1])
        self.stop_agreed = int(totals[-1])
        t2 = time.perf_counter()
        if len(bad) and self.config.on_nan == "stop":  # the same on every rank: the flags were summed
            raise NonFiniteLoss(f"non-finite loss at epoch {epoch}, step {step} (rank {bad[0]}'s batch"
                                f"{' and others' if len(bad) > 1 else ''}); stopped before updating, "
                                f"{self._kept()} (--on-nan skip or continue to go on)")
        update = not len(bad) or self.config.on_nan == "continue"
        if update:
            with phase("optimizer"):
                self._schedule(epoch * self.steps_per_epoch + step)
                if self.config.grad_clip is not None:  # the gradients are the all-reduced ones: alike on every rank
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
                self.optimizer.step()
        t3 = time.perf_counter()
        if update and self.embeddings is not None:  # collective: the rows' gradients to their owners, updated there
            with phase("embedding"):
                self.embeddings.step(batch)
            timers["embed_grads_s"] += self.embeddings.seconds[0]
            timers["embed_update_s"] += self.embeddings.seconds[1]
        for key, dt in (("sample_s", batch.sample_s), ("gather_s", batch.gather_s), ("wait_s", batch.wait_s),
                        ("compute_s", t1 - t0), ("allreduce_s", t2 - t1), ("optimizer_s", t3 - t2)):
            timers[key] += dt
        return tuple(float(v) for v in totals[:3])

    def _schedule(self, step: int) -> None:
        """The learning rates at global ``step`` (--lr-schedule, --warmup-steps; trainer/schedule.py)."""
        c = self.config
        if c.lr_schedule == "none" and not c.warmup_steps:
            return
        factor = lr_factor(c.lr_schedule, c.warmup_steps, step, c.epochs * self.steps_per_epoch)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor

    def _kept(self) -> str:
        """Which checkpoint a stopped run leaves to resume from."""
        if self.checkpoints is None:
            return "no checkpoints were asked for (--checkpoint-dir)"
        found = self.checkpoints.found()
        return f"the last good checkpoint is {found[0]}" if found else "no checkpoint was written yet"

    # ---------------------------------------------------------------- the run

    def prepare(self) -> None:
        """Collective set-up after start-up's agreement: warm-up and the feature cache."""
        c, comm = self.config, self.comm
        # Warm-up (loads the kernels, touches the maps) before anything is timed. Here, not
        # in the constructor: vanilla sampling is collective, and a rank that failed to load
        # would leave the others waiting in it.
        t0 = time.perf_counter()
        train = self.loaders["train"]
        with phase("prepare"):
            train.warm_up()  # builds the feature cache, with --cache-fraction
            if self.embeddings is not None:
                self.embeddings.warm_up()
        if train.cache is not None:
            for name, loader in self.loaders.items():
                if loader is not train:
                    loader.attach_cache(train.cache)
            sizes = comm.allgather_object(train.cache.nbytes)
            if self.rank == 0:
                self.reporter.note(f"fastsample.train: feature cache ({c.cache_policy}): {len(train.cache.ids):,} "
                                   f"rows, {max(sizes) / 2**20:.1f} MiB per rank at most, warm-up and build in "
                                   f"{seconds(time.perf_counter() - t0)}")
        self.choose_matmul()

    def describe(self) -> str:
        """The start-up lines: what is trained, and how the job runs."""
        c, comm = self.config, self.comm
        model = getattr(self.model, "encoder", self.model)
        shape = f"hidden {c.hidden}, {c.layers} layers" + (f", {c.heads} heads" if c.model == "rgat" else "")
        return (f"fastsample.train: {self.shard.name} ({self.shard.num_nodes:,} nodes), {self.task.describe()}model "
                f"{c.model} ({type(model).__name__}, {shape}), fanouts {list(c.fanouts)}, batch {c.batch_size}/rank "
                f"({c.batch_size * comm.size} global), lr {c.lr:g}, epochs {self.start_epoch}..{c.epochs - 1}\n"
                f"  {comm.size} ranks x {torch.get_num_threads()} threads, mode {c.mode}, sampler "
                f"{self.loaders['train'].sampler.name}, backend {comm.name}, {self.steps_per_epoch} steps/epoch, "
                f"precision {c.precision}, matmul {self.matmul_note}")

    def run(self) -> list[EpochRecord]:
        c, lead = self.config, self.rank == 0
        self.prepare()
        if lead:
            self.reporter.started(self.describe())
            if self.resumed:
                (self.reporter.warn if "skipped" in self.resumed else self.reporter.note)(
                    f"fastsample.train: {self.resumed}")
            legend = self.task.legend()  # what the epoch line's columns mean, where not obvious
            if legend:
                self.reporter.note(legend)
            warning = self.task.warn_single_step(self)
            if warning:
                self.reporter.warn(warning)
            if c.sampler == "twostep" and c.mode == "vanilla":  # asked for by name: say what runs instead
                self.reporter.note("fastsample.train: --sampler twostep runs as numba in vanilla mode (the owners "
                                   "pick their nodes' neighbours; twostep is hybrid mode's baseline): the same batches")
            if c.log_json:
                self._log_header()
        history = []
        self.t_first_step = time.perf_counter()  # --target-val-acc's clock
        with phase("train"):
            self._epochs(history)
        if lead:
            self.reporter.finished(history)
        if c.target_val_acc is not None and not any(r.time_to_target_s is not None for r in history):
            raise TargetMissed(f"target val acc {c.target_val_acc} not reached in epochs {self.start_epoch}.."
                               f"{c.epochs - 1}")
        return history

    def _log_header(self) -> None:
        """Open this run in the --log-json file (runlog.py): its header record; a file that
        already holds runs gets this one after them (said on the console)."""
        c = self.config
        log = Path(c.log_json)
        before = sum(1 for r in runlog.read_runs(log) if r.run_id != self.run_id) if log.is_file() else 0
        job = {"ranks": self.comm.size, "threads": torch.get_num_threads(), "backend": self.comm.name,
               "sampler": self.loaders["train"].sampler.name, "steps_per_epoch": self.steps_per_epoch,
               "matmul": self.matmul_note, "device": str(self.device),
               "model_class": type(getattr(self.model, "encoder", self.model)).__name__,
               "parameters": sum(p.numel() for p in self.model.parameters())}
        resumed = {"epoch": self.start_epoch, "step": self.start_step} if self.resumed else None
        runlog.append_line(log, runlog.header(self.run_id, c, runlog.data_identity(
            c.data, self.shard.name, self.shard.num_nodes), job, resumed))
        if before:
            self.reporter.note(f"fastsample.train: log: run {self.run_id} "
                               f"{'resumed' if resumed else 'appended'} in {log}, after {before} other run(s)")

    def _epochs(self, history: list) -> None:
        c, lead = self.config, self.rank == 0
        for epoch in range(self.start_epoch, c.epochs):
            first = self.start_step if epoch == self.start_epoch else 0
            record = self.train_epoch(epoch, first)
            reached = record.time_to_target_s is not None
            if not record.complete and not reached:  # stopped mid-epoch: save the step to resume at, then end
                self._preempted(epoch, first + len(record.step_losses), record)
            if c.eval_every and (epoch + 1) % c.eval_every == 0 and not reached:
                with phase("evaluation"):
                    record.add(self.task.evaluate(self, epoch))
                record.time_to_target_s = self._time_to_target(record.score)
                reached = record.time_to_target_s is not None
                record.stopped_early = self._patience_ran_out(record)
                if record.stopped_early:
                    record.early_best = {"epoch": self.early["epoch"], "score": self.early["best"],
                                         "kept": f"epoch-{self.early['epoch']}.pt" if self.checkpoints else None}
            record.best_before = self.best_before
            best = self.checkpoints.progress.get("best") if self.checkpoints is not None else None
            if self.checkpoints is not None and record.score is not None and (best is None or
                                                                              record.score > best["score"]):
                self.checkpoints.progress["best"] = {"epoch": record.epoch, "score": record.score,
                                                     "metrics": dict(record.metrics)}
            if self.checkpoints is not None:  # collective with embeddings: each rank saves its shard
                self.checkpoints.save(epoch, self.model, self.optimizer, self.comm, self.embeddings,
                                      **({} if record.complete else {"step": first + len(record.step_losses)}))
            history.append(record)
            if lead:
                self.reporter.epoch(record)
                if c.log_json:
                    append_log(c.log_json, record)
            if reached or record.stopped_early:
                break
            if self.stop_agreed and epoch + 1 < c.epochs:  # asked at an epoch's last step: it is saved whole
                self._preempted(epoch + 1, 0, None)

    def _patience_ran_out(self, record: EpochRecord) -> bool:
        """--early-stop: whether ``record``'s evaluation is the N-th in a row without a better
        score (the same on every rank: the score is all-reduced). Keeps the best epoch's
        checkpoint from pruning."""
        if self.config.early_stop is None or record.score is None:
            return False
        if not self.early or record.score > self.early["best"]:
            self.early = {"best": record.score, "epoch": record.epoch, "stale": 0}
        else:
            self.early["stale"] += 1
        if self.checkpoints is not None:
            self.checkpoints.progress["early_stop"] = self.early
            self.checkpoints.kept = {f"epoch-{self.early['epoch']}.pt"}
        return self.early["stale"] >= self.config.early_stop

    def _time_to_target(self, score: float | None) -> float | None:
        """Seconds since the run's first step if the validation ``score`` reaches --target-val-acc,
        else None (the same decision on every rank: the score is all-reduced)."""
        target = self.config.target_val_acc
        if target is None or score is None or score < target:
            return None
        return time.perf_counter() - self.t_first_step

    def _preempted(self, epoch: int, step: int, record: EpochRecord | None) -> None:
        """Save the state to resume at (epoch, step), log the partial epoch, raise Preempted."""
        c = self.config
        saved = None
        if self.checkpoints is not None and record is not None:
            path = self.checkpoints.save(epoch, self.model, self.optimizer, self.comm, self.embeddings, step=step,
                                         steps_per_epoch=self.steps_per_epoch)
            saved = f"saved {path}"
        elif self.checkpoints is not None:
            saved = f"saved {self.checkpoints.found()[0]}"
        if record is not None and self.rank == 0 and c.log_json:
            append_log(c.log_json, record)
        name = ({signal.SIGTERM: "SIGTERM", signal.SIGUSR1: "SIGUSR1"}.get(self.stop_signal, f"signal {self.stop_signal}")
                if self.stop_signal else "a signal to another rank")
        if self.checkpoints is None:  # nothing to resume from: not the status a requeue acts on
            raise Preempted(f"stopped by {name} before epoch {epoch}, step {step}: nothing saved (no "
                            "--checkpoint-dir), so a rerun starts over", 128 + (self.stop_signal or signal.SIGTERM))
        raise Preempted(f"stopped by {name} before epoch {epoch}, step {step}: {saved}; run the same command with "
                        "--resume to continue from there", PREEMPTED)

    def train_epoch(self, epoch: int, first_step: int = 0) -> EpochRecord:
        """Train ``epoch`` from ``first_step`` (a resumed mid-epoch checkpoint's) on; stops
        after a step at which a stop was asked for (the record is then not complete)."""
        c, comm, loader = self.config, self.comm, self.loaders["train"]
        t_epoch = time.perf_counter()
        timers = dict.fromkeys(TIMERS, 0.0)
        comm.counters.reset()
        loader.set_epoch(epoch, first_step)
        before = loader.gather_counts()
        losses, totals, complete = [], np.zeros(3), True
        evals, reached_s = [], None  # --eval-every-steps' results; when --target-val-acc was met
        position(epoch, first_step)
        for step, batch in enumerate(loader, start=first_step):
            loss_sum, correct, count = self.train_step(batch, epoch, step, timers)
            position(epoch, step + 1)
            losses.append(loss_sum / max(count, 1))
            if math.isfinite(loss_sum) or c.on_nan == "continue":  # a skipped step counts in no mean
                totals += (loss_sum, correct, count)
            if self.rank == 0:
                self.reporter.step(epoch, step, self.steps_per_epoch, losses[-1])
            if c.eval_every_steps and (epoch * self.steps_per_epoch + step + 1) % c.eval_every_steps == 0:
                t_eval = time.perf_counter()
                with comm.counters.excluded(), phase("evaluation"):  # the epoch's traffic is its steps'
                    val = self.task.validate(self, epoch)
                evals.append({"step": step, self.task.score: val, "s": t_eval - self.t_first_step,
                              "eval_s": time.perf_counter() - t_eval})
                reached_s = self._time_to_target(val)
                if reached_s is not None and step + 1 < self.steps_per_epoch:
                    complete = False  # the run ends here
                    break
            if self.stop_agreed and step + 1 < self.steps_per_epoch:  # every rank leaves after this same step
                complete = False
                break
        position(epoch, AFTER_STEPS)  # not the step past the last one
        epoch_s = time.perf_counter() - t_epoch - sum(e["eval_s"] for e in evals)  # the steps' time
        flop, floor = self.roofline.epoch()  # after the clock: its one measurement is not the epoch's
        traffic = comm.counters.reset()
        cached, remote, local = (loader.gather_counts()[k] - before[k] for k in ("cached", "remote", "local"))
        counted = totals[2] or math.nan  # every step skipped (--on-nan skip): no mean, NaN, not a perfect 0
        return EpochRecord(epoch=epoch, loss=totals[0] / counted, train_acc=totals[1] / counted,
                           train_metric=self.task.train_metric, task=self.task.name,
                           epoch_s=epoch_s, **timers, products_flop=flop, products_floor_s=floor, bytes_sent=traffic.bytes_sent,
                           rounds_per_step=traffic.rounds / max(len(losses), 1), steps=len(losses),
                           steps_per_epoch=self.steps_per_epoch,
                           net_modelled_s=traffic.modelled_s if c.net_model else None, step_losses=losses,
                           cache_hit_rate=cached / max(cached + remote, 1) if c.cache_fraction else None,
                           remote_input_fraction=(cached + remote) / max(cached + remote + local, 1),
                           first_step=first_step, complete=complete, step_evals=evals,
                           target_val_acc=c.target_val_acc, time_to_target_s=reached_s,
                           **({"metrics": {self.task.score: evals[-1][self.task.score]}, "eval": "steps"} if evals else {}))


def startup(config: TrainConfig, comm: Communicator, **components) -> Trainer:
    """Build the trainer on every rank (``components``: Trainer's model, optimizer, loss,
    reporter). A failure on any rank (bad partition, mismatched settings, missing file)
    raises the same fastsample.comm.agree.StartupError on every rank, naming the first
    failing rank and carrying its exception, so none is left waiting in a collective."""
    @in_phase("startup")
    def settings():
        # the one collective first, on every rank alike; then nothing collective: a rank that
        # fails here (rank 0's outputs: a locked checkpoint directory) must not leave the
        # others inside the trainer's collectives while it waits in the agreement
        shared = {k: getattr(config, k) for k in marked(config, "shared")}
        everyone = comm.allgather_object(shared)
        differ = sorted({k for s in everyone for k in s if s[k] != everyone[0][k]})
        if differ:
            raise ValueError(f"ranks were started with different {', '.join(differ)}")
        # every pool alike: the samplers' (OpenMP, Numba: it checks the count first), torch's
        threads = config.threads or default_threads()
        set_num_threads(threads)
        torch.set_num_threads(threads)
        if comm.rank == 0:
            created.append(check_outputs(config))

    created = []  # rank 0: whether check_outputs made the checkpoint directory
    try:
        agree(comm, settings)
        return agree(comm, in_phase("startup")(lambda: Trainer(config, comm, **components)))
    except BaseException:
        if created and config.checkpoint_dir:  # a start-up that failed on any rank leaves nothing behind
            from fastsample.trainer.checkpoint import unlock_directory

            unlock_directory(config.checkpoint_dir)
            if created[0] and not any(Path(config.checkpoint_dir).iterdir()):
                Path(config.checkpoint_dir).rmdir()
        raise
