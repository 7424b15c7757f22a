"""Exact layer-wise inference: every node's output with all of its neighbours.

Sampled evaluation is noisy, and a full-neighbour forward per seed blows up with depth.
Layer-wise inference computes layer 1 for every node, then layer 2 from those rows, and
so on (as DGL's and PyG's full-graph inference do), here across ranks: each rank computes
the rows of the nodes it owns, in batches, and reads the previous layer's rows of remote
neighbours through the same two-round gather as the features, because the hidden rows
are sharded exactly like them. Memory per rank stays O(owned nodes x width): the layer's
input shard and its output shard.

The model provides ``num_layers`` and ``layer(i, block, h) -> h``, layer i alone as in
eval mode (activation included, no dropout); forward(blocks, x) in eval mode must equal
applying them in turn. The built-in GraphSAGE and the PyG examples do.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
from tqdm import tqdm

from fastsample.block import Block
from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.distributed import FeatureGather
from fastsample.loader import open_data
from fastsample.sampling import MFG, assemble, sample, sample_neighbors


def check_layerwise(model) -> None:
    if not (isinstance(getattr(model, "num_layers", None), int) and callable(getattr(model, "layer", None))):
        raise TypeError(f"{type(model).__name__} cannot run layer-wise inference: it needs num_layers and "
                        "layer(i, block, h) (see fastsample/inference.py)")


def all_in_edges(part, seeds: np.ndarray) -> MFG:
    """The MFG of every in-edge of ``seeds`` (nodes this rank owns), from whichever topology
    the share holds: the whole one (hybrid) or its owned rows (vanilla); the same MFG."""
    if part.graph is not None:
        (mfg,) = sample(part.graph, seeds, [-1])  # all neighbours: no draw, no key
        return mfg
    lo = int(part.offsets[part.rank])
    (mfg,) = assemble(seeds, 1, part.num_nodes,
                      lambda dst, _: sample_neighbors(part.local_graph, dst, -1, 0, row_offset=lo))
    return mfg


@torch.no_grad()
def layerwise(model, data, comm: Communicator | None = None, batch_size: int = 4096, device="cpu",
              progress: bool = False) -> np.ndarray:
    """The model's output for every node this rank owns, with all neighbours (exact).

    Args:
        model: a module with ``num_layers`` and ``layer(i, block, h)`` (see the module doc).
        data: a partition directory or RankPartition (a job; a vanilla share reads its own
            rows' in-edges), or a dataset directory (one process).
        comm: the job's communicator; None for one process.
        batch_size: destination nodes per rank per batch (bounds the batch's memory).
        device: where the model runs.
        progress: a bar on rank 0 (drawn only on a terminal).
    Returns:
        float32 (owned nodes, output width): row k is node ``offsets[rank] + k``.
    """
    check_layerwise(model)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive (got {batch_size})")
    comm = comm if comm is not None else LocalCommunicator()
    part = open_data(data, comm, "hybrid")  # a directory: every rank reads its nodes' in-edges from the whole topology
    offsets = np.asarray(part.offsets, dtype=np.int64)
    lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
    topology = part.graph if part.graph is not None else part.local_graph
    owned = np.arange(lo, hi, dtype=topology.indices.dtype)
    steps = max(math.ceil(int(b - a) / batch_size) for a, b in zip(offsets[:-1], offsets[1:]))
    was_training = model.training
    model.eval()
    device = torch.device(device)
    bar = tqdm(total=model.num_layers * steps, desc="layer-wise inference", leave=False,
               disable=not progress or comm.rank != 0 or not sys.stderr.isatty())
    h = part.features  # this layer's input rows, sharded like the features
    try:
        for i in range(model.num_layers):
            gather = FeatureGather(comm, offsets, h)
            out = None
            for step in range(steps):  # the same count on every rank: the gather is collective
                seeds = owned[step * batch_size:(step + 1) * batch_size]
                mfg = all_in_edges(part, seeds)
                x = torch.from_numpy(gather(mfg.src_ids)).to(device)
                y = model.layer(i, Block.from_mfg(mfg, device), x).float().cpu().numpy()
                if out is None:
                    out = np.empty((hi - lo, y.shape[1]), dtype=np.float32)
                out[step * batch_size:step * batch_size + len(seeds)] = y
                bar.update()
            h = out
    finally:
        bar.close()
        model.train(was_training)
    return h
