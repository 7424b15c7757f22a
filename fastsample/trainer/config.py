"""TrainConfig: every setting of ``python -m fastsample.train``, one typed field each.

The command line is generated from these fields (fastsample.config); the checks are the
fields' own plus the cross-field ones in __post_init__. ``shared=False`` marks what may
differ between the ranks of a job (paths a rank writes, threads, the allocator, output);
``resume=True`` what a checkpoint must have been saved with to continue from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastsample.comm import BACKENDS
from fastsample.config import ConfigError, option, validate
from fastsample.distributed.cache import POLICIES
from fastsample.loader import MODES
from fastsample.matmul import BACKENDS as MATMUL_BACKENDS
from fastsample.matmul import PRECISIONS
from fastsample.sampling import KERNELS

__all__ = ["TrainConfig"]


def _positive(v) -> bool:
    return v > 0


@dataclass(frozen=True)
class TrainConfig:
    data: str = option(help="partition directory (python -m fastsample.partition); for one process, a dataset "
                       "directory also serves")
    model: str = option("sage", "sage: the built-in GraphSAGE (native kernels on the CPU); or FILE.py:FUNCTION, a "
                        "factory FUNCTION(in_dim, num_classes, config) -> torch.nn.Module whose forward(blocks, x) "
                        "follows fastsample/block.py (e.g. examples/pyg_gat.py:build)", resume=True)
    mode: str = option("hybrid", "hybrid: topology replicated, 2 rounds per step; vanilla: topology partitioned, 2L",
                       choices=MODES, resume=True)
    sampler: str = option("auto", "the sampling kernel (vanilla mode: its owner side, native or numba)",
                          choices=(*KERNELS, "auto"))
    backend: str = option("mpi", "collectives: mpi (mpi4py); ccl (oneCCL, an optional build: "
                          "scripts/install-ccl.sh); gloo or nccl (torch.distributed)", choices=BACKENDS)
    fanouts: tuple[int, ...] = option((15, 10, 5), "per layer, input layer first; -1 = all neighbours (write "
                                      "--fanouts=-1,-1)", resume=True, expect="comma-separated integers",
                                      check=(lambda v: len(v) > 0 and all(f == -1 or f > 0 for f in v),
                                             "must be positive or -1"))
    batch_size: int = option(1000, "training seeds per rank per step (small graphs such as Cora want ~32-64)",
                             resume=True, check=(_positive, "must be positive"))
    hidden: int = option(256, "width of the hidden GraphSAGE layers", resume=True,
                         check=(_positive, "must be positive"))
    layers: int | None = option(None, "GNN layers (default: number of fanouts)", resume=True,
                                check=(_positive, "must be positive"))
    dropout: float = option(0.5, "dropout probability after each hidden layer",
                            check=(lambda v: 0 <= v < 1, "must be in [0, 1)"))
    lr: float = option(0.006, "Adam's learning rate", check=(_positive, "must be positive"))
    weight_decay: float = option(0.0, "Adam's L2 penalty", check=(lambda v: v >= 0, "must be >= 0"))
    epochs: int = option(10, "epochs to train (with --resume: in all)", check=(_positive, "must be positive"))
    max_steps: int | None = option(None, "cap the steps per epoch (timing runs on large graphs); default: a full "
                                   "epoch", check=(_positive, "must be positive"))
    seed: int = option(0, "fixes initial weights, sampling, shuffling and dropout: runs with the same seed give the "
                       "same losses", resume=True, check=(lambda v: v >= 0, "must be >= 0"))
    device: str = option("cpu", "where the model runs; sampling and the gather stay on the CPU",
                         choices=("cpu", "cuda"), shared=False)
    eval_every: int = option(1, "evaluate val/test every N epochs (0: never)", check=(lambda v: v >= 0, "must be >= 0"))
    eval: str = option("sampled", "sampled: val/test nodes with the training fanouts (fast, noisy); full: exact "
                       "layer-wise inference over every node with all neighbours (fastsample/inference.py)",
                       choices=("sampled", "full"))
    eval_batch_size: int = option(4096, "nodes per rank per batch of --eval full", check=(_positive, "must be positive"))
    cache_fraction: float = option(0.0, "every rank keeps a copy of the features of this fraction of all nodes, "
                                   "those it would fetch most from other ranks; the gather then sends fewer bytes "
                                   "(same results)", check=(lambda v: 0 <= v < 1, "must be in [0, 1)"))
    cache_policy: str = option("frequency", "which rows to cache: frequency (input nodes of this rank's first epoch "
                               "of batches, pre-sampled) or degree (most out-edges); see "
                               "fastsample/distributed/cache.py", choices=POLICIES)
    prefetch: int = option(0, "sample and gather up to DEPTH steps ahead in a background thread while the model "
                           "computes (same results; pays when the gather waits on the network, see "
                           "bench/README.md); 0: off", metavar="DEPTH", check=(lambda v: 0 <= v <= 8, "must be in 0..8"))
    precision: str = option("fp32", "fp32: everything in float32 (the paper's setting); bf16: features gathered, "
                            "sent and read by the first layer in 16 bits (bfloat16, or float16 where stored so), "
                            "and the model's matrix products in bfloat16 with fp32 accumulation where the CPU "
                            "makes that pay (AVX-512 BF16, AMX: measured at start-up); weights, optimizer and loss "
                            "stay fp32. See fastsample/matmul.py", choices=PRECISIONS)
    matmul: str = option("auto", "the engine of the built-in GraphSAGE's matrix products: auto (the faster of blas "
                         "and onednn for this model's shapes, measured once per host and cached, so reruns "
                         "reproduce), blas (torch's default, MKL on x86) or onednn. With --precision bf16, auto "
                         "uses bf16 products only where they measure faster, blas or onednn use them always",
                         choices=MATMUL_BACKENDS)
    checkpoint_dir: str | None = option(None, "save model and optimizer after every epoch (rank 0)", shared=False)
    resume: bool = option(False, "continue from the latest checkpoint in --checkpoint-dir")
    log_json: str | None = option(None, "rank 0 appends one JSON object per epoch to this file (its directory must "
                                  "exist)", shared=False)
    net_model: tuple[float, ...] | None = option(None, "add a modelled network's cost to every collective "
                                                 "(benchmarks on one machine; see fastsample/comm/netmodel.py), "
                                                 "e.g. 10,25", metavar="LATENCY_US,GBPS",
                                                 expect="LATENCY_US,GBPS, e.g. 10,25",
                                                 check=(lambda v: len(v) == 2 and min(v) >= 0 and v[1] > 0,
                                                        "must be LATENCY_US,GBPS with GBPS > 0"))
    threads: int | None = option(None, "threads per rank for the model and the samplers (default: OMP_NUM_THREADS "
                                 "or all cores)", shared=False, check=(_positive, "must be positive"))
    allocator: str = option("retain", "retain: keep freed memory mapped for reuse (no per-step page faults; the "
                            "process keeps its peak heap; see fastsample/allocator.py); system: malloc's defaults",
                            choices=("retain", "system"), shared=False)
    quiet: bool = option(False, "no progress bar (it is shown only when stderr is a terminal anyway)", shared=False)

    def __post_init__(self):
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        if self.layers is None:
            object.__setattr__(self, "layers", len(self.fanouts))
        validate(self)
        if self.layers != len(self.fanouts):
            raise ConfigError("layers", f"{self.layers} needs {self.layers} fanouts, got {list(self.fanouts)}")
        if self.resume and not self.checkpoint_dir:
            raise ConfigError("resume", "needs a checkpoint_dir (--checkpoint-dir)")
