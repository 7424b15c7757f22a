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

On typed data the rows are per node type, sharded by the partition's type runs, and the
model's layer takes a TypedBlock and {node type: rows} and returns {node type: rows of
its destinations} (the built-in R-GCN does); every layer but the last computes all of a
rank's nodes, the last only its nodes of the target type. Featureless types start from
``inputs`` (the trainer's embedding shards).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
from tqdm import tqdm

from fastsample import bf16
from fastsample.block import Block
from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.distributed import FeatureGather
from fastsample.distributed.typed_gather import TypedGather
from fastsample.loader import open_data
from fastsample.sampling import MFG, assemble, sample, sample_neighbors
from fastsample.typed_block import TypedBlock


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
    lo, g = int(part.offsets[part.rank]), part.local_graph
    # all neighbours of every edge type: no draw, so the key is irrelevant
    fanout, key = np.full(g.num_edge_types, -1), np.zeros(g.num_edge_types, np.uint64)
    (mfg,) = assemble(seeds, 1, part.num_nodes, g,
                      lambda dst, _: sample_neighbors(g, dst, fanout, key, row_offset=lo))
    return mfg


@torch.no_grad()
def layerwise(model, data, comm: Communicator | None = None, batch_size: int = 4096, device="cpu",
              progress: bool = False, inputs: dict | None = None) -> np.ndarray:
    """The model's output for every node this rank owns, with all neighbours (exact).

    Args:
        model: a module with ``num_layers`` and ``layer(i, block, h)`` (see the module doc).
        data: a partition directory or RankPartition (a job; a vanilla share reads its own
            rows' in-edges), or a dataset directory (one process).
        comm: the job's communicator; None for one process.
        batch_size: destination nodes per rank per batch (bounds the batch's memory).
        device: where the model runs.
        progress: a bar on rank 0 (drawn only on a terminal).
        inputs: typed data: {node type: this rank's input rows} for the featureless types
            (their embedding shards); the features serve the others.
    Returns:
        float32 (owned nodes, output width): row k is node ``offsets[rank] + k``; typed
        data: (owned nodes of the target type, output width), row k its k-th of them.
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
    if part.typed:
        try:
            return _typed(model, part, comm, batch_size, device, bar, {**part.features, **(inputs or {})})
        finally:
            bar.close()
            model.train(was_training)
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


def _typed(model, part, comm: Communicator, batch_size: int, device, bar, h: dict) -> np.ndarray:
    """layerwise on typed data (see the module doc); ``h``: {node type: this rank's rows}."""
    topology = part.graph if part.graph is not None else part.local_graph
    node_types, edge_types = topology.node_types, topology.edge_types
    missing = [t for t in node_types if h.get(t) is None]
    if missing:
        raise ValueError(f"inputs: node types {', '.join(missing)} have no features: give their rows (embeddings)")
    runs, T, r = np.asarray(part.layout["type_runs"], dtype=np.int64), len(node_types), comm.rank
    target = node_types.index(part.target_type)
    for i in range(model.num_layers):
        last = i == model.num_layers - 1
        # the nodes this layer computes, a contiguous range per rank: all of its own, or its target type's
        lo_hi = ([(int(runs[q * T + target]), int(runs[q * T + target + 1])) for q in range(comm.size)] if last
                 else [(int(runs[q * T]), int(runs[(q + 1) * T])) for q in range(comm.size)])
        lo, hi = lo_hi[r]
        steps = max(math.ceil((b - a) / batch_size) for a, b in lo_hi)  # the same on every rank
        gather = TypedGather(comm, runs, h)
        dtype = topology.indices.dtype
        out = {}
        for step in range(steps):
            seeds = np.arange(lo + step * batch_size, min(hi, lo + (step + 1) * batch_size), dtype=dtype)
            mfg = all_in_edges(part, seeds)
            rows, src_type, _ = gather(mfg.src_ids)
            block = TypedBlock.from_mfg(mfg, src_type[:mfg.num_src], node_types, edge_types, device)
            x = {t: bf16.to_tensor(v).to(device) for t, v in rows.items()}
            y = model.layer(i, block, x)
            dst_type = src_type[:mfg.num_dst]
            for t, v in y.items():
                k = node_types.index(t)
                if t not in out:
                    out[t] = np.empty((int(runs[r * T + k + 1] - runs[r * T + k]), v.shape[1]), dtype=np.float32)
                # a type's destinations come in id order: their rows in the type's run
                at = mfg.src_ids[:mfg.num_dst][dst_type == k].astype(np.int64) - runs[r * T + k]
                out[t][at] = v.float().cpu().numpy()
            bar.update()
        h = out
    return h[part.target_type]
