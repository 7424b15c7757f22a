"""TrainConfig: every setting of ``python -m fastsample.train``, one typed field each.

The command line is generated from these fields (fastsample/cli.py); the checks are the
fields' own plus the cross-field ones in __post_init__. ``shared=False`` marks what may
differ between the ranks of a job (paths a rank writes, threads, the allocator, output);
``resume=True`` what a checkpoint must have been saved with to continue from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastsample.comm.watchdog import stall_option
from fastsample.choices import COMM_BACKENDS, KERNELS, MATMUL_CHOICES, SCORERS
from fastsample.options import ConfigError, option
from fastsample.job import JobShape, positive
from fastsample.tasks import TASKS, task_class, task_options
from fastsample.trainer.schedule import SCHEDULES

__all__ = ["TrainConfig", "layer_fanouts", "relation_fanouts_ok"]


def _per_task(name: str, help: str | None = None, **marks):
    """option()'s arguments for a field whose default is its task's (the task's ``defaults``), said in its
    help: JobShape's field ``name`` (its help, checks and marks), or a new one with ``help``."""
    kw = dict(JobShape.__dataclass_fields__[name].metadata) if help is None else dict(help=help, **marks)
    by_value = {}  # the tasks that share a default, named together
    for task, t in TASKS.items():
        by_value.setdefault(t.defaults[name], []).append(task)
    shown = "; ".join(f"{','.join(map(str, v)) if isinstance(v, tuple) else v} with --task {', '.join(tasks)}"
                      for v, tasks in by_value.items())
    kw["help"] += f" (default: {shown})"
    return kw


_PAIR = re.compile(r"\s*([^=;,\s]+)\s*=\s*(-?\d+)\s*")


def relation_fanouts_ok(spec: str) -> bool:
    """Whether ``spec`` is layers of RELATION=K pairs (see TrainConfig.relation_fanouts)."""
    for layer in spec.split(";"):
        for pair in filter(str.strip, layer.split(",")):
            m = _PAIR.fullmatch(pair)
            if not m or int(m.group(2)) < -1:
                return False
    return True


def layer_fanouts(config: "TrainConfig") -> list:
    """The sampler's fanouts: --fanouts, with each layer's --relation-fanouts as a mapping
    ({relation: k, "*": that layer's --fanouts}) where given."""
    if config.relation_fanouts is None:
        return list(config.fanouts)
    out = []
    for default, layer in zip(config.fanouts, config.relation_fanouts.split(";")):
        pairs = {m.group(1): int(m.group(2)) for m in map(_PAIR.fullmatch, filter(str.strip, layer.split(",")))}
        out.append({**pairs, "*": default} if pairs else default)
    return out


@dataclass(frozen=True, kw_only=True)
class TrainConfig(JobShape):
    """The shape of the job (JobShape: mode, fanouts, batch size, model width, cache,
    prefetch, allocator) and everything else the trainer takes. Fields a task has defaults for are
    None until __post_init__ fills them with their task's value."""

    GROUPS = (  # --help's sections (fastsample/cli.py); a field in none is listed under "options"
        ("data and task", None, ("data", "task")),
        ("model", None, ("model", "hidden", "layers", "heads", "dropout")),
        ("training", None, ("epochs", "batch_size", "lr", "lr_schedule", "warmup_steps", "grad_clip", "weight_decay",
                            "seed", "max_steps", "on_nan")),
        ("sampling and distribution", None, ("fanouts", "mode", "sampler", "backend", "stall_timeout")),
        ("typed data", "Typed (heterogeneous) data is detected from the dataset (its meta.json lists node types); "
         "there --model sage builds the R-GCN (fastsample/nn/rgcn.py), featureless node types get learnable "
         "embeddings, and every other option serves as on untyped data.",
         ("relation_fanouts", "embed_dim", "embed_lr")),
        ("link prediction (--task link)", "On a dataset written by python -m fastsample.data link-split (or OGB's "
         "link layout). Every other option serves link runs too, typed data included; --eval does not apply "
         "(link evaluation is always exact, layer-wise, in batches of --eval-batch-size edges). --exclude also "
         "serves the edge tasks (--task edge-class, edge-regression).",
         ("negatives", "negative_sampler", "exclude", "scorer", "hits")),
        ("evaluation", None, ("eval_every", "eval", "eval_batch_size", "eval_every_steps", "target_val_acc",
                              "early_stop")),
        ("performance", None,
         ("precision", "matmul", "cache_fraction", "cache_policy", "prefetch", "threads", "allocator", "device",
          "net_model")),
        ("checkpoints, logs and output", None, ("checkpoint_dir", "resume", "keep_checkpoints", "log_json",
                                                "tensorboard", "progress", "progress_every", "quiet")),
    )

    fanouts: tuple[int, ...] | None = option(None, **_per_task("fanouts"))
    batch_size: int | None = option(None, **_per_task("batch_size"))
    hidden: int | None = option(None, **_per_task("hidden", JobShape.__dataclass_fields__["hidden"].metadata["help"]
                                                  + "; with an edge task (link, edge-class, edge-regression) also "
                                                  "the encoder's outputs, the embeddings its head compares",
                                                  resume=True, check=(positive, "must be positive")))

    data: str = option(help="partition directory (python -m fastsample.partition); for one process, a dataset "
                       "directory also serves")
    task: str = option("node", "; ".join(f"{name}: {t.help}" for name, t in TASKS.items()) + " (fastsample/tasks/)",
                       choices=tuple(TASKS), resume=True)
    model: str = option("sage", "sage: the built-in GraphSAGE (native kernels on the CPU; on typed data the built-in "
                        "R-GCN, fastsample/nn/rgcn.py); rgat: the built-in R-GAT (MLPerf's GNN benchmark model, "
                        "native attention kernels, fastsample/nn/rgat.py; on untyped data a GAT); or FILE.py:FUNCTION, a "
                        "factory FUNCTION(in_dim, num_classes, config) -> torch.nn.Module whose forward(blocks, x) "
                        "follows fastsample/nn/block.py (e.g. examples/pyg_gat.py:build)", resume=True)
    sampler: str = option("auto", "the sampling kernel, all giving identical batches: native (fused, C++/OpenMP), "
                          "numba (fused, Numba), twostep (the baseline: COO, then compaction and COO to CSC); "
                          "auto: native where it was built, else numba (vanilla mode: the owners' side, native "
                          "or numba)",
                          choices=(*KERNELS, "auto"))
    backend: str = option("mpi", "collectives: mpi (mpi4py); ccl (oneCCL, an optional build: "
                          "scripts/install-ccl.sh); gloo or nccl (torch.distributed)", choices=COMM_BACKENDS)
    relation_fanouts: str | None = option(None, "typed data: fanouts per relation, overriding --fanouts for the "
                                          "relations named; layers (input layer first) separated by ';', each a "
                                          "comma-separated list of RELATION=K (a relation name, or SRC:REL:DST; K "
                                          "may be 0 or -1), e.g. 'cites=5,written_by=0;cites=3' with --fanouts 15,10",
                                          resume=True, metavar="SPEC",
                                          check=(lambda v: relation_fanouts_ok(v), "must be layers of RELATION=K "
                                                 "separated by ';' (K an integer >= -1), e.g. cites=5,writes=0;cites=3"))
    negatives: int = option(3, "link: negative destinations drawn per positive edge in training (the held-out "
                            "edges' fixed negatives are link-split's --negatives)",
                            check=(positive, "must be positive"))
    negative_sampler: str = option("uniform", "link: how negatives are drawn: uniform over all nodes, or degree "
                                   "(in-degree^0.75, as word2vec and PinSage)", choices=("uniform", "degree"))
    exclude: str = option("auto", "link and edge tasks: edges a batch's MFGs may not use, skipped while sampling "
                          "(fanouts stay full): self (the batch's own edges), reverse (and their reverse edges), "
                          "none; auto: reverse where the relation has reverse edges (an undirected graph's, or a "
                          "reverse relation), else self", choices=("auto", "none", "self", "reverse"))
    scorer: str = option("mlp", "link: the pair scorer: dot (inner product of the two embeddings), distmult (a "
                         "learned diagonal of the target relation between them: sum a * r * b) or mlp (an MLP "
                         "of their elementwise product)", choices=SCORERS, resume=True)
    hits: tuple[int, ...] = option((1, 3, 10), "link: the K of the Hits@K measures (log fields val_hits@K, "
                                   "test_hits@K)", expect="comma-separated positive integers",
                                   check=(lambda v: len(v) > 0 and min(v) > 0, "must be positive integers"))
    heads: int = option(4, "rgat: attention heads per layer (they split --hidden: it must be a multiple)",
                        resume=True, check=(positive, "must be positive"))
    dropout: float = option(0.5, "dropout probability after each hidden layer",
                            check=(lambda v: 0 <= v < 1, "must be in [0, 1)"))
    lr: float | None = option(None, **_per_task("lr", "Adam's learning rate", check=(positive, "must be positive")))
    embed_lr: float = option(0.01, "typed data: the learning rate of the featureless types' embeddings (Adam, SparseAdam's rule, applied "
                             "at their owners: fastsample/distributed/row_adam.py)",
                             check=(positive, "must be positive"))
    lr_schedule: str = option("none", "the learning rate over the run's steps (a function of the step alone, so "
                              "a resume continues it): none; cosine (decays to 0 by the last step); step (x0.1 "
                              "from half the steps, x0.01 from three quarters); the embeddings' --embed-lr is not "
                              "scheduled", choices=SCHEDULES, resume=True)
    warmup_steps: int = option(0, "ramp the learning rate up linearly over the first N steps", resume=True,
                               check=(lambda v: v >= 0, "must be >= 0"))
    grad_clip: float | None = option(None, "scale the gradients down to this global norm where it is larger (after "
                                     "the all-reduce, so every rank clips alike)", metavar="NORM", resume=True,
                                     check=(positive, "must be positive"))
    weight_decay: float = option(0.0, "Adam's L2 penalty", check=(lambda v: v >= 0, "must be >= 0"))
    epochs: int = option(10, "epochs to train (with --resume: in all)", check=(positive, "must be positive"))
    max_steps: int | None = option(None, "cap the steps per epoch (timing runs on large graphs); default: a full "
                                   "epoch", check=(positive, "must be positive"))
    seed: int = option(0, "fixes initial weights, sampling, shuffling and dropout: runs with the same seed give the "
                       "same losses", resume=True, check=(lambda v: v >= 0, "must be >= 0"))
    device: str = option("cpu", "where the model runs; sampling and the gather stay on the CPU",
                         choices=("cpu", "cuda"), shared=False)
    eval_every: int = option(1, "evaluate val/test every N epochs (0: never)", check=(lambda v: v >= 0, "must be >= 0"))
    eval: str = option("sampled", "sampled: val/test nodes with the training fanouts (fast, noisy); full: exact "
                       "layer-wise inference over every node with all neighbours (fastsample/loading/layerwise.py)",
                       choices=("sampled", "full"))
    eval_batch_size: int = option(4096, "nodes per rank per batch of exact evaluation (--eval full; link and edge "
                                  "tasks' layer-wise embeddings), and their held-out edges per batch",
                                  check=(positive, "must be positive"))
    eval_every_steps: int | None = option(None, "node tasks: also measure the validation score (accuracy; "
                                          "regression's R2) (sampled, the val split only) every N training steps, counted across epochs (MLPerf's GNN "
                                          "benchmark evaluates every 0.05 epoch); each result goes to its epoch's "
                                          "record (step_evals)", check=(positive, "must be positive"))
    target_val_acc: float | None = option(None, "stop at the first evaluation (--eval-every-steps or an epoch's) "
                                          "whose validation accuracy reaches this (MLPerf's R-GAT: 0.72), and "
                                          "report the time to it: from this run's first step, evaluations "
                                          "included; a run that ends without reaching it exits with status 5",
                                          check=(lambda v: 0 < v <= 1, "must be in (0, 1]"))
    early_stop: int | None = option(None, "end the run once the validation score (the task's: val_acc, val_auc, "
                                    "...) has not improved for N evaluations in a row (--eval-every); with "
                                    "--checkpoint-dir the best epoch's checkpoint is kept", metavar="PATIENCE",
                                    check=(positive, "must be positive"))
    matmul: str = option("auto", "the engine of the built-in models' matrix products (GraphSAGE, R-GCN, R-GAT): "
                         "auto (the faster of blas and onednn for this model's shapes, measured once per host and "
                         "cached, so reruns reproduce), blas (torch's default, MKL on x86) or onednn. With "
                         "--precision bf16 or int8, auto uses bf16 products only where they measure faster, blas or onednn "
                         "use them always",
                         choices=MATMUL_CHOICES)
    checkpoint_dir: str | None = option(None, "save model and optimizer after every epoch (rank 0; typed data's "
                                        "embeddings: every rank its shard, so every rank must reach it); one job "
                                        "at a time: a second job on it fails at start-up", shared=False)
    resume: bool = option(False, "continue from the newest complete checkpoint in --checkpoint-dir (a newer one "
                          "with a file that does not load, its own or an embedding shard, e.g. cut short by a crash, "
                          "is skipped and said so)")
    keep_checkpoints: int = option(3, "keep the newest N checkpoints in --checkpoint-dir (0: all); an older one is "
                                   "removed only once a newer one is complete", check=(lambda v: v >= 0, "must be >= 0"))
    on_nan: str = option("stop", "a step whose loss is not finite (NaN, inf) on any rank: stop (every rank ends with "
                         "one line naming the epoch, step and rank; the checkpoints so far are kept), skip (no update "
                         "from that step; its loss is logged as it was), or continue (update anyway)",
                         choices=("stop", "skip", "continue"))
    stall_timeout: float | None = stall_option()
    log_json: str | None = option(None, "rank 0 appends this run to this file (its directory must exist): a header "
                                  "record (run id, resolved settings, data, host, versions), then one JSON object "
                                  "per epoch; a file holding earlier runs keeps them (python -m fastsample.report "
                                  "draws and compares them)", shared=False)
    tensorboard: str | None = option(None, "rank 0 writes TensorBoard scalars (the loss per step; per epoch the "
                                     "loss, the task's measures and the time per phase) into DIR/RUN_ID "
                                     "(tensorboard --logdir DIR; needs pip install 'fastsample[tensorboard]')",
                                     shared=False, metavar="DIR")
    net_model: tuple[float, ...] | None = option(None, "add a modelled network's cost to every collective "
                                                 "(benchmarks on one machine; see fastsample/comm/netmodel.py), "
                                                 "e.g. 10,25", metavar="LATENCY_US,GBPS",
                                                 expect="LATENCY_US,GBPS, e.g. 10,25",
                                                 check=(lambda v: len(v) == 2 and min(v) >= 0 and v[1] > 0,
                                                        "must be LATENCY_US,GBPS with GBPS > 0"))
    threads: int | None = option(None, "threads per rank for the model and the samplers (default: OMP_NUM_THREADS, "
                                 "else this node's cores shared among its ranks; where a node's ranks x threads exceed its cores, idle threads sleep: "
                                 "OMP_WAIT_POLICY=PASSIVE unless set)", shared=False,
                                 check=(positive, "must be positive"))
    progress: str | None = option(None, "rank 0's progress within an epoch: bar (redrawn in place: a terminal's), "
                                  "lines (one every --progress-every seconds: step, steps/s, ETA, loss; what a "
                                  "file, a Slurm log or mpiexec's forwarding shows well), none; default: bar where "
                                  "the user watches a terminal (mpiexec's counts), else lines", choices=("bar", "lines", "none"),
                                  shared=False)
    progress_every: float = option(60.0, "seconds between progress lines (--progress lines)", shared=False,
                                   metavar="SECONDS", check=(positive, "must be positive"))
    quiet: bool = option(False, "no progress at all (--progress none)", shared=False)

    def refuse_inert(self, given: set[str] = frozenset()) -> None:
        """A setting that would do nothing here is refused (ConfigError): another task's option,
        or --heads for GraphSAGE, where set to other than its default, or ``given`` (the
        fields a command line named: python -m fastsample.train passes them, so that
        --scorer mlp on a node task is refused though mlp is the default)."""
        named = lambda name: name in given or getattr(self, name) != TrainConfig.__dataclass_fields__[name].default
        for name, serves in task_options().items():
            if self.task not in serves and named(name):
                tasks = serves[0] if len(serves) == 1 else f"{', '.join(serves[:-1])} and {serves[-1]}"
                raise ConfigError(name, f"serves --task {tasks} only, not --task {self.task}")
        if self.model == "sage" and named("heads"):
            raise ConfigError("heads", "serves --model rgat (or a model of your own that reads config.heads), "
                              "not --model sage")

    def __post_init__(self):
        try:
            task = task_class(self.task)
        except ValueError:
            raise ConfigError("task", f"must be one of {', '.join(TASKS)} (got {self.task!r})") from None
        for name, value in task.defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        super().__post_init__()
        self.refuse_inert()
        task.check(self)
        if self.relation_fanouts is not None and len(self.relation_fanouts.split(";")) != len(self.fanouts):
            raise ConfigError("relation_fanouts", f"has {len(self.relation_fanouts.split(';'))} layers, --fanouts "
                              f"{len(self.fanouts)}")
        if self.model == "rgat" and self.hidden % self.heads:
            raise ConfigError("heads", f"{self.heads} does not divide --hidden {self.hidden} (each head gets "
                              "hidden / heads channels)")
        if self.eval_every_steps is not None and self.prefetch:
            raise ConfigError("eval_every_steps", "does not run with --prefetch (the evaluation's collectives would "
                              "interleave with the steps fetched ahead)")
        if self.target_val_acc is not None and not (self.eval_every_steps or self.eval_every):
            raise ConfigError("target_val_acc", "needs an evaluation to stop at (--eval-every-steps N, or "
                              "--eval-every N > 0)")
        if self.early_stop is not None and not self.eval_every:
            raise ConfigError("early_stop", "needs an evaluation every few epochs (--eval-every N > 0)")
        if self.resume and not self.checkpoint_dir:
            raise ConfigError("resume", "needs a checkpoint_dir (--checkpoint-dir)")
