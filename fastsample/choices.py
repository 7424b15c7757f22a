"""The names fastsample's settings accept, and the rules they share: one home each.

The configs (trainer/config.py, plan.py, infer.py), the command lines generated from them,
the library's own argument checks and the planner all read these, so a new value is added
once. Depends on nothing, so every layer may import it.
"""

from __future__ import annotations

# How a job holds the graph: hybrid (topology replicated, features sharded: 2 rounds per
# step) or vanilla (both partitioned: 2 rounds per lower layer). A partition may be written
# for both at once.
MODES = ("hybrid", "vanilla")
PARTITION_MODES = (*MODES, "both")
PARTITION_METHODS = ("auto", "metis", "kaminpar", "random")

# Collectives: mpi4py, Intel oneCCL, or torch.distributed (gloo; nccl on GPUs).
COMM_BACKENDS = ("mpi", "gloo", "ccl", "nccl")
TORCH_BACKENDS = ("gloo", "nccl")

# The sampling kernels (fastsample/sampling): fused C++/OpenMP, fused Numba, two-step baseline.
KERNELS = ("native", "numba", "twostep")

# The engines of the built-in models' matrix products (fastsample/nn/matmul.py), and the
# trainer's precisions.
MATMUL_ENGINES = ("blas", "onednn")
MATMUL_CHOICES = ("auto", *MATMUL_ENGINES)
PRECISIONS = ("fp32", "bf16", "int8")
# the precisions whose products are bf16 where the CPU runs them faster (int8 is a storage of
# the features: what the model computes on is bf16's)
BF16_PRODUCTS = ("bf16", "int8")

# How node features are stored in a dataset (bf16 and int8 are training precisions, not storages).
FEATURE_DTYPES = ("float32", "float16")

# Which rows the hot-feature cache keeps (fastsample/distributed/cache.py).
CACHE_POLICIES = ("frequency", "degree")
# link prediction's pair scorers (fastsample/nn/link.py)
SCORERS = ("dot", "distmult", "mlp")

FANOUTS_RULE = "must be positive or -1"


def fanouts_ok(fanouts) -> bool:
    """The fanouts rule: at least one layer, each positive or -1."""
    return len(fanouts) > 0 and all(int(f) == f and (f == -1 or f > 0) for f in fanouts)


def check_fanouts(fanouts, name: str = "fanouts") -> list:
    """``fanouts`` as a list, one entry per layer: an int (every edge type), or on a typed
    graph a mapping {relation: int} whose values may also be 0 (that relation is not
    sampled); ValueError naming ``name`` and the rule otherwise."""
    from collections.abc import Mapping

    try:
        values = [dict(f) if isinstance(f, Mapping) else int(f) for f in fanouts]
        if any(isinstance(f, int) and f != int(g) for f, g in zip(values, fanouts)):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of integers (got {fanouts!r})") from None
    if not values or not all(isinstance(f, dict) or f == -1 or f > 0 for f in values):
        raise ValueError(f"{name} {FANOUTS_RULE} for all neighbours, at least one layer (got {values})")
    for f in (f for f in values if isinstance(f, dict)):
        for key, k in f.items():
            if not isinstance(key, (str, tuple)) or isinstance(k, bool) or not _is_int(k) or k < -1:
                raise ValueError(f"{name}: a layer's mapping takes relation -> an integer >= -1 (0: none, -1: all) "
                                 f"(got {f})")
    return [f if not isinstance(f, dict) else {key: int(k) for key, k in f.items()} for f in values]


def _is_int(v) -> bool:
    try:
        return int(v) == v
    except (TypeError, ValueError):
        return False


def check_choice(value, allowed: tuple, name: str) -> None:
    """ValueError naming ``name`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))} (got {value!r})")
