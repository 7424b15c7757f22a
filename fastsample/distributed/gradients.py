"""Synchronous data parallelism's one reduction: average the gradients over the ranks."""

from __future__ import annotations

import numpy as np
import torch

from fastsample.comm import Communicator


def average_gradients(model, comm: Communicator, extra=None) -> np.ndarray | None:
    """Replace every parameter's gradient by its mean over the ranks, in one all-reduce of
    one flat bucket. Call it on every rank every step, after backward and before the
    optimizer step, also on a rank whose batch was empty (its gradients count as zeros).

    Args:
        model: a torch.nn.Module, or an iterable of its parameters.
        comm: the job's communicator.
        extra: optional numbers to sum over the ranks in the same bucket (as float32), e.g.
            a step's loss sum and sample count; saves a second collective.
    Returns:
        the summed ``extra`` (float32 array), or None.
    """
    params = [p for p in (model.parameters() if isinstance(model, torch.nn.Module) else model) if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    tail = [] if extra is None else [torch.from_numpy(np.asarray(extra, dtype=np.float32))]
    flat = torch.cat([p.grad.reshape(-1).cpu() for p in params] + tail).numpy()
    comm.all_reduce(flat)
    n = len(flat) - (0 if extra is None else len(tail[0]))
    flat[:n] /= comm.size
    at = 0
    for p in params:
        p.grad.copy_(torch.from_numpy(flat[at:at + p.numel()]).view_as(p))
        at += p.numel()
    return None if extra is None else flat[n:].copy()
