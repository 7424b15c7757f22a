"""JobShape: the settings that size a training job, one field each, shared by the trainer's
TrainConfig (fastsample/trainer/config.py) and the memory planner's PlanConfig
(fastsample/plan.py), so that the two agree on names, defaults, checks and help.

Imports no torch: the planner runs without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastsample.choices import CACHE_POLICIES, FANOUTS_RULE, MODES, PRECISIONS, fanouts_ok
from fastsample.options import ConfigError, option, validate

__all__ = ["JobShape", "positive"]


def positive(v) -> bool:
    return v > 0


@dataclass(frozen=True, kw_only=True)
class JobShape:
    mode: str = option("hybrid", "hybrid: topology replicated, 2 rounds per step; vanilla: topology partitioned, 2L",
                       choices=MODES, resume=True)
    fanouts: tuple[int, ...] = option((15, 10, 5), "per layer, input layer first; -1 = all neighbours "
                                      "(--fanouts -1,-1)", resume=True, expect="comma-separated integers",
                                      check=(fanouts_ok, FANOUTS_RULE))
    batch_size: int = option(1000, "training seeds per rank per step (small graphs such as Cora want ~32-64)",
                             resume=True, check=(positive, "must be positive"))
    hidden: int = option(256, "width of the model's hidden layers (GraphSAGE's, the R-GCN's)", resume=True,
                         check=(positive, "must be positive"))
    layers: int | None = option(None, "GNN layers (default: number of fanouts)", resume=True,
                                check=(positive, "must be positive"))
    embed_dim: int = option(64, "typed data: width of the learnable embeddings of featureless node types (sharded "
                            "over the ranks as features are; see fastsample/distributed/embedding.py)", resume=True,
                            check=(positive, "must be positive"))
    cache_fraction: float = option(0.0, "every rank keeps a copy of the features of this fraction of all nodes, "
                                   "those it would fetch most from other ranks; the gather then sends fewer bytes "
                                   "(same results)", check=(lambda v: 0 <= v < 1, "must be in [0, 1)"))
    cache_policy: str = option("frequency", "which rows to cache: frequency (input nodes of this rank's first epoch "
                               "of batches, pre-sampled) or degree (most out-edges); see "
                               "fastsample/distributed/cache.py", choices=CACHE_POLICIES)
    prefetch: int = option(0, "sample and gather up to DEPTH steps ahead in a background thread while the model "
                           "computes (same results; pays when the gather waits on the network, see "
                           "bench/README.md); 0: off", metavar="DEPTH", check=(lambda v: 0 <= v <= 8, "must be in 0..8"))
    precision: str = option("fp32", "fp32: everything in float32 (the paper's setting); bf16: features gathered, "
                            "sent and read by the first layer in 16 bits (bfloat16, or float16 where stored so), "
                            "and the model's matrix products in bfloat16 with fp32 accumulation where the CPU "
                            "makes that pay (AVX-512 BF16, AMX: measured at start-up); weights, optimizer and loss "
                            "stay fp32. int8: as bf16, with the features held, gathered and sent in 8 bits (a "
                            "power-of-two scale per column, the same on every rank; the values the model reads "
                            "are within 1/128 of each column's largest magnitude). See fastsample/nn/matmul.py "
                            "and fastsample/int8.py", choices=PRECISIONS)
    allocator: str = option("retain", "retain: keep freed memory mapped for reuse (no per-step page faults; the "
                            "process keeps its peak heap; see fastsample/allocator.py); system: malloc's defaults",
                            choices=("retain", "system"), shared=False)

    def __post_init__(self):
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        if self.layers is None:
            object.__setattr__(self, "layers", len(self.fanouts))
        validate(self)
        if self.layers != len(self.fanouts):
            raise ConfigError("layers", f"{self.layers} needs {self.layers} fanouts, got {list(self.fanouts)}")
