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

Untyped data is the one-type case of typed data: the rows are per node type, sharded by
the partition's type runs; every layer but the last computes all of a rank's nodes, the
last only its nodes of the target type (untyped: all of them). On typed data the model's
layer takes a Block with per-relation edge lists and {node type: rows} and returns {node
type: rows of its destinations} (the built-in R-GCN does); on untyped data one matrix.
Featureless types start from ``inputs`` (the trainer's embedding shards).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from fastsample.progress import progress_bar

from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.distributed import FeatureGather
from fastsample.data.graph import by_type, unwrap_one_type
from fastsample.loading.loader import inputs_of, open_data
from fastsample.phases import in_phase
from fastsample.sampling import MFG, assemble, sample, sample_neighbors


def check_layerwise(model) -> None:
    if not (isinstance(getattr(model, "num_layers", None), int) and callable(getattr(model, "layer", None))):
        raise TypeError(f"{type(model).__name__} cannot run layer-wise inference: it needs num_layers and "
                        "layer(i, block, h) (see fastsample/loading/layerwise.py)")


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
@in_phase("layerwise")
def layerwise(model, data, comm: Communicator | None = None, batch_size: int = 4096, device="cpu",
              progress: bool = False, inputs: dict | None = None, every_type: bool = False, layers: int | None = None):
    """The model's output for every node of the target type this rank owns (``every_type``:
    for every node it owns), with all neighbours (exact).

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
        every_type: the last layer computes every node type (a link encoder's embeddings),
            not only the target type.
        layers: run the first ``layers`` layers only (default: all): their output is the
            last hidden layer's, every node type's (a node model's embeddings).
    Returns:
        float32 (owned nodes of the target type, output width): row k is the k-th of them
        (untyped data: node ``offsets[rank] + k``); with ``every_type`` on typed data
        {node type: (its owned nodes, output width)}.
    """
    check_layerwise(model)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive (got {batch_size})")
    comm = comm if comm is not None else LocalCommunicator()
    part = open_data(data, comm, "hybrid")  # a directory: every rank reads its nodes' in-edges from the whole topology
    topology = part.graph if part.graph is not None else part.local_graph
    node_types, edge_types = part.node_type_names, topology.edge_types
    h = part.features if inputs is None else {**part.features, **inputs}
    missing = [t for t, f in by_type(h).items() if f is None]
    if missing:
        raise ValueError(f"inputs: node types {', '.join(missing)} have no features: give their rows (embeddings)")
    runs, T, r = part.type_runs, len(node_types), comm.rank
    target = part.target_index
    layers = model.num_layers if layers is None else layers
    if not 1 <= layers <= model.num_layers:
        raise ValueError(f"layers must be in 1..{model.num_layers} (got {layers})")
    every_type = every_type or layers < model.num_layers  # a hidden layer computes every type
    # the nodes each layer computes, a contiguous range per rank: all of its own, then its target type's
    ranges = [[(int(runs[q * T]), int(runs[(q + 1) * T])) for q in range(comm.size)]] * (layers - 1)
    ranges.append([(int(runs[q * T]), int(runs[(q + 1) * T])) if every_type else
                   (int(runs[q * T + target]), int(runs[q * T + target + 1])) for q in range(comm.size)])
    steps = [max(math.ceil((b - a) / batch_size) for a, b in lo_hi) for lo_hi in ranges]  # the same on every rank
    was_training = model.training
    model.eval()
    device = torch.device(device)
    bar = progress_bar(total=sum(steps), desc="layer-wise inference", unit="batch", leave=False,
                       disable=not progress or comm.rank != 0)
    try:
        for i in range(layers):
            # the input layer's int8 shards (--precision int8) are read with their scales, decoded
            gather = FeatureGather(comm, runs, h, scales=part.scales if i == 0 else None)
            lo, hi = ranges[i][r]
            out = {}
            for step in range(steps[i]):
                seeds = np.arange(lo + step * batch_size, min(hi, lo + (step + 1) * batch_size),
                                  dtype=topology.indices.dtype)
                mfg = all_in_edges(part, seeds)
                got = gather.gather(mfg.src_ids)
                x, (block,) = inputs_of(gather, got, [mfg], device, node_types, edge_types)
                y = model.layer(i, block, x)
                y = by_type(y)
                dst_type = got.types[:mfg.num_dst]
                for t, v in y.items():
                    k = node_types.index(t)
                    if t not in out:
                        out[t] = np.empty((int(runs[r * T + k + 1] - runs[r * T + k]), v.shape[1]), dtype=np.float32)
                    # a type's destinations come in id order: their rows in the type's run
                    at = mfg.src_ids[:mfg.num_dst][dst_type == k].astype(np.int64) - runs[r * T + k]
                    out[t][at] = v.float().cpu().numpy()
                bar.update()
            h = unwrap_one_type(out)
    finally:
        bar.close()
        model.train(was_training)
    return h if every_type else by_type(h)[node_types[target]]
