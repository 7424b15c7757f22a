"""The model registry: which network a run's ``--model`` names, built for its data.

    sage    the built-in GraphSAGE (sage.py); on typed data the built-in R-GCN (rgcn.py)
    rgat    the built-in R-GAT (rgat.py; MLPerf's GNN benchmark model); on untyped data a GAT
    FILE.py:FUNCTION
            a user's factory FUNCTION(in_dim, out_dim, config) -> torch.nn.Module whose
            forward(blocks, x) follows block.py

A built-in entry is a function (in_dim, out_dim, edge_types, target, settings) -> the
encoder, where ``edge_types`` are typed data's relations (None on untyped data),
``target`` the node type whose rows it outputs (None: every type's) and ``settings`` the
run's config (hidden, layers, heads, dropout). The task (fastsample/tasks/) chooses the
output width and the output type, and puts its head around what is built here.
"""

from __future__ import annotations

import sys

from pathlib import Path

import torch

from fastsample.data.graph import EDGE
from fastsample.options import ConfigError

__all__ = ["MODELS", "build_encoder", "load_factory"]


def _sage(in_dim, out_dim: int, edge_types, target, c):
    if edge_types is not None:  # relations to weigh apart: the R-GCN, one weight per relation
        from fastsample.nn.rgcn import RGCN

        return RGCN(in_dim, c.hidden, out_dim, c.layers, edge_types, target, dropout=c.dropout)
    from fastsample.nn.sage import GraphSAGE

    return GraphSAGE(in_dim, c.hidden, out_dim, c.layers, c.dropout)


def _rgat(in_dim, out_dim: int, edge_types, target, c):
    from fastsample.nn.rgat import RGAT

    # untyped data is the one-type case (one relation): a GAT
    return RGAT(in_dim, c.hidden, out_dim, c.layers, edge_types or (EDGE,), target, heads=c.heads, dropout=c.dropout)


MODELS = {"sage": _sage, "rgat": _rgat}


def build_encoder(spec: str, in_dim, out_dim: int, edge_types, target, settings) -> torch.nn.Module:
    """The network ``spec`` names (a MODELS entry, or FILE.py:FUNCTION), ``out_dim`` wide.

    ``in_dim``: the input width, or on typed data {node type: width} (a user's factory gets
    that dict); ``edge_types``: typed data's relations, None on untyped data; ``target``:
    the node type whose rows come out (untyped: NODE), None for every type's; ``settings``:
    the run's config."""
    if spec in MODELS:
        return MODELS[spec](in_dim, out_dim, edge_types, target, settings)
    factory = load_factory(spec)
    try:
        model = factory(in_dim, out_dim, settings)
    except Exception as e:  # the user's code: say it was there, and what it was given
        given = f"in_dim {in_dim!r} ({'typed data: a width per node type' if isinstance(in_dim, dict) else 'an int'})"
        raise ConfigError("model", f"{spec}: the factory raised {type(e).__name__}: {e} (it was called with {given}, "
                          f"num_classes {out_dim})") from e
    if not isinstance(model, torch.nn.Module):
        raise ConfigError("model", f"{spec}: returned {type(model).__name__}, not a torch.nn.Module")
    return model


def load_factory(spec: str):
    """FILE.py:FUNCTION -> the function (a user's model factory)."""
    import importlib.util

    file, _, name = spec.rpartition(":")
    if not file or not name:
        raise ConfigError("model", f"{spec}: expected {', '.join(MODELS)} or FILE.py:FUNCTION")
    path = Path(file)
    if not path.is_file():
        raise ConfigError("model", f"{spec}: {path} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"fastsample_user_model_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:  # its own folder first, as running the file would: it may import a module beside it
        sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        if added:
            sys.path.remove(folder)
        raise ConfigError("model", f"{spec}: importing {path} failed ({type(e).__name__}: {e})") from e
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError("model", f"{spec}: {path} defines no function {name!r}")
    return factory
