"""R-GCN over typed blocks: the built-in model for typed (heterogeneous) data.

Each layer is DGL's ``HeteroGraphConv({relation: SAGEConv(mean)}, aggregate="sum")``,
numerically: for a destination node v of type t,

    h'_v = sum over relations r into t of  W_self_r h_v + W_neigh_r mean_{u in N_r(v)} h_u + b_r

followed, below the last layer, by ReLU and dropout. Node types without features take
their rows from learnable embedding tables that live outside the model, sharded over the
ranks and updated sparsely (fastsample/distributed/embedding.py; the loader gathers
their rows into ``x`` as it does features). The means run on the native kernels (an autograd function over mean_aggregate and its
backward) on the CPU where built, else on a sparse product, to rounding the same numbers.
The last layer computes the target type only.

A layer is one product per destination type over [h | a mean per relation into it]: each
mean is written into its columns of that product's input as it is made (no concatenation),
only the spans whose rows take a gradient get an input gradient (the input layer's features
take none: _Product), and ReLU with dropout is one native pass in place (sage.relu_dropout).
"""

from __future__ import annotations

import torch
from torch import nn

from fastsample.nn import matmul
from fastsample.nn.block import Block, check_widths, typed_inputs
from fastsample.nn.sage import relu_dropout
from fastsample.native import lib as _native
from fastsample.rows import RowTable, tensor_of


class _NativeMean(torch.autograd.Function):
    """mean_{u in N(v)} h[u] per destination on the native kernels, and its backward."""

    @staticmethod
    def forward(ctx, h, block):
        out = torch.empty(block.num_dst, h.shape[1], dtype=torch.float32)
        _native.mean_aggregate(block.indptr, block.indices, h.contiguous(), out)
        ctx.block, ctx.num_src = block, h.shape[0]
        return out

    @staticmethod
    def backward(ctx, g):
        grad = torch.empty(ctx.num_src, g.shape[1], dtype=torch.float32)
        _native.mean_aggregate_backward(ctx.block.indptr, ctx.block.indices, g.contiguous(), None, None, 1.0, grad)
        return grad, None


def mean(block: Block, h) -> torch.Tensor:
    """The mean of each destination's in-neighbours' rows of ``h`` (0 without edges): a
    tensor, or a row table (fastsample/rows.py), read where its rows are."""
    if isinstance(h, RowTable):
        out = torch.empty(block.num_dst, h.width, dtype=torch.float32)
        _mean_into(block, h, out)
        return out
    if _native is not None and h.device.type == "cpu" and h.dtype == torch.float32:
        return _NativeMean.apply(h, block)
    return block.mean(h)


def _takes_grad(h) -> bool:
    """Whether autograd needs ``h``'s gradient here (a row table never takes one)."""
    return torch.is_grad_enabled() and isinstance(h, torch.Tensor) and h.requires_grad


def _self_rows(h, n: int, out: torch.Tensor) -> torch.Tensor | None:
    """``out`` = rows [0, n) of ``h`` (the destinations', first among the sources); returns
    them as autograd sees them where ``h`` takes a gradient, else None."""
    if isinstance(h, RowTable):  # takes no gradient
        h.copy_into(out)
        return None
    rows = tensor_of(h, n)
    out.copy_(rows)
    return rows if _takes_grad(h) else None


def _mean_into(block: Block, h, out: torch.Tensor) -> torch.Tensor | None:
    """``out`` (rows apart: a column block of a product's input) = ``mean(block, h)``. Returns
    the mean as autograd sees it where ``h`` takes a gradient, else None (written in place)."""
    if _takes_grad(h):
        m = mean(block, h)
        out.copy_(m.detach())
        return m
    if isinstance(h, RowTable) and h.readable:
        h.mean_into(block.indptr, block.indices, out, with_self=False)
    elif isinstance(h, RowTable):
        _mean_into(block, tensor_of(h).float(), out)
    elif _native is not None and h.device.type == "cpu" and h.dtype == torch.float32:
        _native.mean_aggregate(block.indptr, block.indices, h.contiguous(), out)
    else:
        out.copy_(block.mean(h.float()))
    return None


class _Product(torch.autograd.Function):
    """z @ w.T + b on the current product plan (fastsample/nn/matmul.py: the engine the trainer
    measured fastest on this CPU), where column spans of z hold ``parts`` (each part's values,
    copied there, and autograd's handle on it). The backward gives each part its span's input
    gradient, g @ w[:, span]; a span of z whose rows take no gradient (the input layer's
    features) gets none computed, where linear() would compute the gradient of all of z."""

    @staticmethod
    def forward(ctx, z, w, b, spans, link, *parts):
        ctx.save_for_backward(z, w)
        ctx.spans, ctx.link = spans, link if link is not None else {}
        return matmul.current().forward(z, w, b)

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        need = ctx.needs_input_grad
        plan = matmul.current()
        g = plan.output_grad(g)  # g^T whole where RGCN.forward had it so written
        g_t, bias_grad = ctx.link.pop("g_t", None), ctx.link.pop("bias_grad", None)  # made by the ReLU's backward
        gw = plan.weight_grad(g if g_t is None else g_t.t(), z) if need[1] else None
        gb = (g.sum(0) if bias_grad is None else bias_grad) if need[2] else None
        return (None, gw, gb, None, None, *(plan.input_grad(g, w[:, a:b]) if need[5 + i] else None
                                            for i, (a, b) in enumerate(ctx.spans)))


class RGCN(nn.Module):
    """R-GCN (see the module doc). Its input rows may be row tables (``reads_row_tables``,
    fastsample/rows.py): the input layer's means read the gathered rows where they are.

    Args:
        in_dims: {node type: its input width (an embedding's for a featureless type)} in node type order;
        hidden: width of the hidden layers; num_classes: the output width;
        num_layers: layers, one per block; edge_types: the canonical edge types;
        target_type: the node type whose outputs are returned (None: every type's, a link encoder);
        dropout: probability after each hidden layer.
    """

    reads_row_tables = True

    def __init__(self, in_dims: dict, hidden: int, num_classes: int, num_layers: int, edge_types, target_type: str,
                 dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
        check_widths(in_dims)
        self.node_types, self.edge_types = list(in_dims), [tuple(e) for e in edge_types]
        self.target_type, self.dropout = target_type, nn.Dropout(dropout)
        dims = dict(in_dims)
        # a destination sums one term per relation into its type: each starts at 1/sqrt(that
        # many) of nn.Linear's scale, so the sum starts at one relation's (ogbn-mag's papers
        # have 4 relations in; unscaled, the first loss was ~2x ln(classes) on the generator)
        fan_in = {t: max(sum(e[2] == t for e in self.edge_types), 1) for t in dims}
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            out = num_classes if i == num_layers - 1 else hidden
            self.layers.append(nn.ModuleDict({
                "__".join(e): _RelationConv(dims[e[0]], dims[e[2]], out, fan_in[e[2]] ** -0.5)
                for e in self.edge_types}))
            dims = dict.fromkeys(dims, out)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _spans(self, i: int, t: str) -> list[tuple[str, int]]:
        """(node type, width) of each column span of layer i's product input for destination
        type t, [h | a mean per relation into t] (see _conv); [] where no relation enters t."""
        convs = [(e[0], self.layers[i]["__".join(e)]) for e in self.edge_types if e[2] == t]
        if not convs:
            return []
        return [(t, convs[0][1].self_lin.in_features)] + [(src, c.neigh_lin.in_features) for src, c in convs]

    def product_shape(self, rows: int) -> tuple[int, int, int]:
        """(rows, k, d_out) of the input layer's widest product, over [h | a mean per relation
        into one destination type]: it decides the engines (fastsample/nn/matmul.py)."""
        k = max(sum(width for _, width in self._spans(0, t)) for t in self.node_types)
        return rows, k, self.layers[0]["__".join(self.edge_types[0])].self_lin.out_features

    def products(self, blocks: list[Block], batch=None) -> list[tuple[str, str, int, int, int]]:
        """A training step's matrix products, (layer, op, rows, k, n) each (fastsample/nn/roofline.py):
        per layer and computed node type one, over its destinations' [h | a mean per relation
        into the type] (see _conv): the forward, the weight gradient, and the input gradient
        of the spans that take one (above the input layer, all; there, a learnable
        embedding's)."""
        learnable = {t for t, v in (batch.inputs.items() if batch is not None else ())
                     if isinstance(v, torch.Tensor) and v.requires_grad}
        out = []
        for i, block in enumerate(blocks):
            n = self.layers[i]["__".join(self.edge_types[0])].self_lin.out_features
            for d in self._computed(i):
                spans = self._spans(i, d)
                k = sum(width for _, width in spans)
                k_grad = sum(width for t, width in spans if i > 0 or t in learnable)
                out += [(f"{i}:{d}", op, block.num_dst_dict[d], kk, n) for op, kk in zip(matmul.OPS, (k, k, k_grad))
                        if kk]
        return out

    def _computed(self, i: int) -> list[str]:
        """The node types layer i computes: all of them, but only the target type at the last
        layer (every type where the model has no target type: a link encoder's)."""
        return [self.target_type] if i == len(self.layers) - 1 and self.target_type is not None else self.node_types

    def forward(self, blocks: list[Block], x: dict) -> torch.Tensor:
        """The target type's outputs for the last block's destinations of that type; without
        a target type, every destination's, in their order (a link encoder's embeddings)."""
        h = self._inputs(x)
        last = len(self.layers) - 1
        for i, block in enumerate(blocks):
            weight_only, links = set(), ({} if i < last else None)
            h = self._conv(i, block, h, weight_only, links)
            if i < last:  # a product with no input gradient reads its output's gradient only transposed
                h = {t: relu_dropout(v, self.dropout, t in weight_only, links.get(t)) for t, v in h.items()}
        if self.target_type is not None:
            return h[self.target_type]
        return blocks[-1].rows_in_dst_order(h)

    def layer(self, i: int, block: Block, h: dict) -> dict:
        """Layer i alone as in eval mode (ReLU below the last layer, no dropout), {node type:
        its destinations' rows}; the last layer gives the target type only. In eval mode
        forward is these in turn, which layer-wise inference (fastsample/loading/layerwise.py) needs."""
        out = self._conv(i, block, self._inputs(h))
        return out if i == len(self.layers) - 1 else {t: torch.relu(v) for t, v in out.items()}

    def _inputs(self, x: dict) -> dict:
        return typed_inputs(x, self.node_types)

    def _conv(self, i: int, block: Block, h: dict, weight_only: set | None = None, links: dict | None = None) -> dict:
        """Layer i before its activation: per destination type t, the sum over its relations r
        of W_self_r h + b_r + W_neigh_r mean_r, as one product: z = [h | mean_r1 | mean_r2 ...]
        times [sum_r W_self_r | W_neigh_r1 | W_neigh_r2 ...] plus sum_r b_r (the self terms
        of all relations share h: one product for them, not one per relation). Each mean is
        written into its columns of z as it is made; only the spans whose rows take a
        gradient get an input gradient (_Product); the types whose product takes none are
        added to ``weight_only``. ``links``: {type: a dict its product shares with the ReLU
        after it} is filled where given (sage.relu_dropout: that pass makes the product's bias
        gradient, and its output gradient transposed, for it)."""
        layer = self.layers[i]
        out = {}
        for t in self._computed(i):
            into = [(r, e) for r, e in enumerate(block.edge_types) if e[2] == t]
            n = block.num_dst_dict[t]
            if not into:
                lin = layer["__".join(self.edge_types[0])].self_lin
                out[t] = lin.weight.new_zeros(n, lin.out_features)
                continue
            convs = [layer["__".join(e)] for _, e in into]
            w = torch.cat([sum(c.self_lin.weight for c in convs)] + [c.neigh_lin.weight for c in convs], dim=1)
            z = torch.empty(n, w.shape[1], device=w.device)
            sources = [(None, h[t])] + [(block.relation_block(r), h[e[0]]) for r, e in into]
            parts, spans, at = [], [], 0
            for rel, src in sources:
                width = src.width if isinstance(src, RowTable) else src.shape[1]
                view = z[:, at:at + width]
                part = _self_rows(src, n, view) if rel is None else _mean_into(rel, src, view)
                if part is not None:
                    parts.append(part)
                    spans.append((at, at + width))
                at += width
            link = links.setdefault(t, {}) if links is not None else None
            out[t] = _Product.apply(z, w, sum(c.self_lin.bias for c in convs), tuple(spans), link, *parts)
            if not parts and weight_only is not None:
                weight_only.add(t)
        return out


class _RelationConv(nn.Module):
    """One relation's SAGEConv (mean) parameters, W_self h_dst + b + W_neigh mean(h_src)
    (RGCN._conv computes a destination type's relations together)."""

    def __init__(self, src_dim: int, dst_dim: int, out_dim: int, scale: float = 1.0):
        super().__init__()
        self.self_lin = nn.Linear(dst_dim, out_dim)
        self.neigh_lin = nn.Linear(src_dim, out_dim, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                p.mul_(scale)
