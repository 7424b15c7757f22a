"""Link prediction's model and measures, and the edge tasks' model.

LinkModel is an encoder (any node model of fastsample's signature, forward(blocks, x) ->
one row per last-layer destination; the built-in GraphSAGE by default) and a scorer of
node pairs: "dot" (the embeddings' inner product), "distmult" (a learned diagonal of the
target relation between them, <a, r, b> = sum a * r * b, as DistMult; r starts at ones,
i.e. at dot) or "mlp" (an MLP of their elementwise product, as OGB's link examples). Exact evaluation embeds every node once with the
encoder's layer-wise inference (fastsample/loading/layerwise.py), then scores each held-out edge
against its fixed negatives:

    MRR      mean of 1 / rank of the positive among its K negatives (ties: the mean of the
             optimistic and pessimistic rank, as OGB's evaluator)
    Hits@K   the share of positives ranked within the first K
    ROC-AUC  P(a positive outscores a negative) over every positive and every negative,
             from counts in 2**20 bins of the logit over [-50, 50] summed over the ranks
             (exact up to ties within 1e-4 of a logit, which count one half)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fastsample.choices import SCORERS
from fastsample.nn.roofline import products_of

__all__ = ["Headed", "LinkModel", "EdgeModel", "SCORERS", "bce_loss", "rank_counts", "AUC_BINS", "auc_from_histograms", "score_histogram"]

AUC_BINS = 2 ** 20
_LOGIT_RANGE = 50.0


class Headed(nn.Module):
    """An encoder (any node model of fastsample's signature, forward(blocks, x) -> one row per
    last-layer destination) with a head over its rows, which the task applies: what the
    trainer, the product engines and layer-wise inference see of it is the encoder's."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, blocks, x) -> torch.Tensor:
        """The embeddings of the last block's destinations."""
        return self.encoder(blocks, x)

    @property
    def reads_16bit_input(self) -> bool:
        return getattr(self.encoder, "reads_16bit_input", False)

    @property
    def reads_row_tables(self) -> bool:
        return getattr(self.encoder, "reads_row_tables", False)

    @property
    def reads_learnable_rows(self) -> bool:
        return getattr(self.encoder, "reads_learnable_rows", False)

    def product_shape(self, rows: int):
        """The encoder's widest product (fastsample/nn/matmul.py's engine choice), if it says."""
        shape_of = getattr(self.encoder, "product_shape", None)
        return shape_of(rows) if shape_of is not None else None

    def head_products(self, mlp: nn.Sequential | None, batches: list) -> list:
        """The products of ``mlp`` over each (name, rows) in ``batches`` (fastsample/nn/roofline.py)."""
        out = []
        for side, rows in batches if mlp is not None else ():
            for j, lin in enumerate(m for m in mlp if isinstance(m, nn.Linear)):
                n, d = lin.weight.shape
                out += [(f"{side}:{j}", op, rows, d, n) for op in ("forward", "weight_grad", "input_grad")]
        return out

    # layer-wise inference runs the encoder alone (fastsample/loading/layerwise.py)
    @property
    def num_layers(self) -> int:
        return self.encoder.num_layers

    def layer(self, i: int, block, h):
        return self.encoder.layer(i, block, h)


class LinkModel(Headed):
    """An encoder and a pair scorer (see the module doc).

    Args:
        encoder: the node model; its outputs are the embeddings (``dim`` wide).
        dim: the embeddings' width; scorer: one of SCORERS.
    """

    def __init__(self, encoder: nn.Module, dim: int, scorer: str = "dot"):
        super().__init__(encoder)
        if scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {', '.join(SCORERS)} (got {scorer!r})")
        self.kind = scorer
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1)) if scorer == "mlp" else None
        # the target relation's diagonal (a run trains one target relation)
        self.relation = nn.Parameter(torch.ones(dim)) if scorer == "distmult" else None

    def products(self, blocks, batch=None) -> list | None:
        """A training step's matrix products (fastsample/nn/roofline.py): the encoder's, and the
        MLP scorer's over the batch's positive and negative pairs; None where the encoder
        does not list its own."""
        listed = products_of(self.encoder, blocks, batch)
        if listed is None:
            return None
        sides = [("score:pos", len(batch)), ("score:neg", len(batch) * batch.neg.shape[1])] if (
            batch is not None and len(batch)) else []
        return list(listed) + self.head_products(self.mlp, sides)

    def score(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Logits of the pairs (a[..., :], b[..., :]), broadcast over the leading dimensions."""
        if self.mlp is not None:
            return self.mlp(a * b).squeeze(-1)
        if self.relation is not None:
            return (a * self.relation * b).sum(-1)
        return (a * b).sum(-1)


class EdgeModel(Headed):
    """An encoder and a head predicting each edge's label from its endpoints' embeddings:
    an MLP of [a, b, a * b] (the pair in order, and their agreement) to ``out`` outputs
    (the classes' logits, or one value), for edge classification and regression.

    Args:
        encoder: the node model; its outputs are the embeddings (``dim`` wide).
        dim: the embeddings' width; out: the head's outputs.
    """

    def __init__(self, encoder: nn.Module, dim: int, out: int):
        super().__init__(encoder)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, dim), nn.ReLU(), nn.Linear(dim, out))

    def products(self, blocks, batch=None) -> list | None:
        listed = products_of(self.encoder, blocks, batch)
        if listed is None:
            return None
        return list(listed) + self.head_products(self.mlp, [("head", len(batch))] if batch is not None else [])

    def predict(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(E, out) outputs of the pairs (a[i], b[i])."""
        return self.mlp(torch.cat([a, b, a * b], dim=-1))


def bce_loss(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of positives (label 1) and negatives (label 0), one mean over all."""
    logits = torch.cat([pos.reshape(-1), neg.reshape(-1)])
    labels = torch.cat([torch.ones(pos.numel(), dtype=logits.dtype, device=logits.device),
                        torch.zeros(neg.numel(), dtype=logits.dtype, device=logits.device)])
    return nn.functional.binary_cross_entropy_with_logits(logits, labels)


def rank_counts(pos: np.ndarray, neg: np.ndarray, ks) -> np.ndarray:
    """[sum of 1/rank, then for each K the positives ranked <= K] over these edges
    (pos (E,), neg (E, K) logits); sum them over the ranks and divide by the edges."""
    pos = pos[:, None]
    rank = 1 + 0.5 * ((neg > pos).sum(1) + (neg >= pos).sum(1))
    return np.array([np.sum(1.0 / rank)] + [np.sum(rank <= k) for k in ks], dtype=np.float64)


def score_histogram(scores: np.ndarray) -> np.ndarray:
    """Counts of ``scores`` in AUC_BINS bins of the logit over [-50, 50] (clipped)."""
    at = np.clip((np.asarray(scores, dtype=np.float64) + _LOGIT_RANGE) / (2 * _LOGIT_RANGE) * AUC_BINS, 0,
                 AUC_BINS - 1).astype(np.int64)
    return np.bincount(at, minlength=AUC_BINS).astype(np.int64)


def auc_from_histograms(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC-AUC from the positives' and negatives' score histograms (ties count one half)."""
    P, N = pos.sum(), neg.sum()
    if not P or not N:
        return float("nan")
    below = np.cumsum(neg) - neg  # negatives in lower bins
    return float((pos * (below + 0.5 * neg)).sum() / (P * N))
