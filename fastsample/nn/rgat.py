"""R-GAT over typed blocks (``--model rgat``): MLPerf's GNN benchmark model, on native kernels.

The model of MLPerf Training's graph_neural_network reference (its RGNN with model="rgat"):
each layer is PyG's ``HeteroConv({relation: GATConv(d_in, hidden // heads, heads,
add_self_loops=False)}, aggr="sum")``; below the last layer LeakyReLU (slope 0.01) and
dropout; after the last, a linear layer on the target type. Numerically, per relation r
into destination type t, with W_r the relation's projection (one matrix for sources and
destinations when their widths agree, as GATConv(int) has; two otherwise, GATConv((s, d))):

    z_u = W_r x_u                        (heads x channels)
    e_uv = leaky_relu(<z_u, a_src_r> + <W_r x_v, a_dst_r>, 0.2)      per head
    h'_v = sum_r [ sum_{u in N_r(v)} softmax_u(e_uv) z_u  (heads concatenated) + b_r ]

What differs from PyG's path is where the work goes, not the numbers (within 1e-5:
tests/test_rgat.py): the scores, their softmax per destination and the weighted sum are
one native pass over each destination's segment (fastsample/native attention.cpp), with no
per-edge message tensor; the destination score <W_r x_v, a_dst_r> is x_v (W_r^T a_dst_r), a
(rows, d_in) x (d_in, heads) product instead of projecting the destinations; only the
destinations a layer needs are computed (the last layer: the target type's). The
projections run on the product engine GraphSAGE uses (fastsample/nn/matmul.py: --matmul,
bf16). Deterministic: every sum is in a fixed order, the same on any thread count.

Untyped data is the one-type case (one relation): the model is then a GAT.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fastsample.data.graph import EDGE, NODE
from fastsample.native import lib as _native
from fastsample.nn import matmul
from fastsample.nn.block import Block, check_widths, typed_inputs
from fastsample.nn.sage import dropout
from fastsample.rows import takes_grad

SCORE_SLOPE = 0.2  # GATConv's negative_slope of the attention scores
ACTIVATION_SLOPE = 0.01  # F.leaky_relu's default, between layers (the reference's)


class _Project(torch.autograd.Function):
    """x @ w^T on the current product plan (fastsample/nn/matmul.py), and its gradients; with
    bf16 products x and g are converted once each, for both products that read them."""

    @staticmethod
    def forward(ctx, x, w):
        plan = matmul.current()
        x = plan.operand(x)  # kept so for the weight gradient
        ctx.save_for_backward(x, w)
        ctx.plan = plan
        return plan.forward(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        plan = ctx.plan
        g = plan.operand(g.contiguous())
        return (plan.input_grad(g, w) if ctx.needs_input_grad[0] else None,
                plan.weight_grad(g, x) if ctx.needs_input_grad[1] else None)


class _PerHead(torch.autograd.Function):
    """Each head's rows of agg (n, heads x d_in) times that head's w (heads, c, d_in)^T, into
    (n, heads x c): one batched product over strided views, which reads and writes the rows
    head-interleaved where they are (einsum("nhi,hci->nhc") would first copy agg head-major
    and its result back; the same products, the same bits)."""

    @staticmethod
    def forward(ctx, agg, w):
        n, (heads, c, d) = len(agg), w.shape
        out = torch.empty(n, heads * c, dtype=agg.dtype)
        torch.bmm(agg.view(n, heads, d).transpose(0, 1), w.transpose(1, 2), out=out.view(n, heads, c).transpose(0, 1))
        ctx.save_for_backward(agg, w)
        return out

    @staticmethod
    def backward(ctx, g):
        agg, w = ctx.saved_tensors
        n, (heads, c, d) = len(agg), w.shape
        g = g.contiguous().view(n, heads, c)
        grad_agg = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_agg = torch.empty_like(agg)
            torch.bmm(g.transpose(0, 1), w, out=grad_agg.view(n, heads, d).transpose(0, 1))
        if ctx.needs_input_grad[1]:
            grad_w = torch.bmm(g.permute(1, 2, 0), agg.view(n, heads, d).transpose(0, 1))
        return grad_agg, grad_w


def per_head(agg: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(n, heads x d_in) rows, each head's slice projected by its own w[h] (c, d_in): (n, heads x c)."""
    if agg.device.type == "cpu" and agg.dtype == torch.float32:
        return _PerHead.apply(agg.contiguous(), w.contiguous())
    return torch.einsum("nhi,hci->nhc", agg.view(len(agg), *w.shape[::2]), w).flatten(1)


def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if x.device.type == "cpu" and x.dtype == torch.float32:
        return _Project.apply(x.contiguous(), w)
    return x @ w.t()


class _NativeAttention(torch.autograd.Function):
    """gat_aggregate (attention.cpp) and its backward."""

    @staticmethod
    def forward(ctx, xs, a_src, a_dst, block, shared):
        heads = a_src.shape[1]
        out = torch.empty(block.num_dst, xs.shape[1] * (heads if shared else 1), dtype=torch.float32)
        alpha = torch.empty(len(block.indices), heads, dtype=torch.float32)
        _native.gat_aggregate(block.indptr, block.indices, xs, a_src, a_dst, shared, SCORE_SLOPE, out, alpha)
        ctx.save_for_backward(xs, a_src, a_dst, alpha)
        ctx.block, ctx.shared = block, shared
        return out

    @staticmethod
    def backward(ctx, g):
        xs, a_src, a_dst, alpha = ctx.saved_tensors
        block = ctx.block
        grads = torch.empty_like(xs), torch.empty_like(a_src), torch.empty_like(a_dst)
        _native.gat_aggregate_backward(block.indptr, block.indices, xs, a_src, a_dst, alpha, g.contiguous(),
                                       ctx.shared, SCORE_SLOPE, *grads)
        return (*grads, None, None)


def attend(block: Block, xs: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor, shared: bool) -> torch.Tensor:
    """Per destination of ``block`` (one relation's) and head h: the softmax over its in-edges
    of leaky_relu(a_src[u, h] + a_dst[v, h]) weighting the sources' rows, the heads'
    results concatenated (0 without edges). A head's row is xs[u]'s h-th slice (xs holds
    projected rows, heads x channels), or if ``shared`` the whole of xs[u] (rows not yet
    projected: (num_dst, heads x xs's width) comes out)."""
    if _native is not None and xs.device.type == "cpu" and xs.dtype == torch.float32:
        return _NativeAttention.apply(xs.contiguous(), a_src.contiguous(), a_dst.contiguous(), block, shared)
    return _attend_reference(block, xs, a_src, a_dst, shared)


def _attend_reference(block: Block, xs, a_src, a_dst, shared: bool):
    """attend in torch ops (PyG's softmax: the max shift is not differentiated): off the CPU."""
    device, heads = xs.device, a_src.shape[1]
    indptr = torch.from_numpy(block.indptr).to(device)
    src = torch.from_numpy(block.indices.astype(np.int64)).to(device)
    dst = torch.repeat_interleave(torch.arange(block.num_dst, device=device), torch.diff(indptr))
    e = F.leaky_relu(a_src[src] + a_dst[dst], SCORE_SLOPE)
    at = dst[:, None].expand(-1, heads)
    top = torch.full((block.num_dst, heads), -math.inf, device=device).scatter_reduce(0, at, e.detach(), "amax")
    w = torch.exp(e - top[dst])
    alpha = w / (torch.zeros(block.num_dst, heads, device=device).index_add(0, dst, w) + 1e-16)[dst]
    rows = xs[src][:, None, :] if shared else xs.view(len(xs), heads, -1)[src]
    msg = alpha[:, :, None] * rows
    return torch.zeros(block.num_dst, *msg.shape[1:], device=device).index_add(0, dst, msg).flatten(1)


def project_first(num_src: int, num_dst: int, num_edges: int, d_in: int, heads: int, width: int) -> bool:
    """Whether a relation's attention is cheaper on projected sources (project each source
    row, then weigh heads x channels per edge) than on raw ones (weigh heads x d_in per
    edge, then project each destination's per-head sums): the products' multiply-adds plus
    the elements weighed, each way. Sizes only, so every rank, kernel and mode decides alike."""
    return num_src * d_in * width + num_edges * width < num_dst * d_in * width + num_edges * heads * d_in


def _glorot(t: torch.Tensor) -> None:
    bound = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))  # PyG's glorot: the last two dimensions
    nn.init.uniform_(t, -bound, bound)


class RelationAttention(nn.Module):
    """One relation's GATConv(add_self_loops=False, concat=True), PyG's parameters: ``lin``
    (sources; destinations too where their widths agree) or ``lin_src``/``lin_dst``,
    ``att_src``, ``att_dst`` (1, heads, channels) and ``bias``."""

    def __init__(self, src_dim: int, dst_dim: int, heads: int, channels: int):
        super().__init__()
        self.heads, self.channels = heads, channels
        width = heads * channels
        if src_dim == dst_dim:
            self.lin = nn.Linear(src_dim, width, bias=False)
        else:
            self.lin_src = nn.Linear(src_dim, width, bias=False)
            self.lin_dst = nn.Linear(dst_dim, width, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, channels))
        self.bias = nn.Parameter(torch.zeros(width))
        for p in (self.att_src, self.att_dst, *(m.weight for m in self._lins())):
            _glorot(p)

    def _lins(self):
        return [self.lin] if hasattr(self, "lin") else [self.lin_src, self.lin_dst]

    @property
    def w_src(self) -> torch.Tensor:
        return self._lins()[0].weight

    @property
    def w_dst(self) -> torch.Tensor:
        return self._lins()[-1].weight

    def forward(self, block: Block, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        H, C = self.heads, self.channels
        w_src, w_dst = self.w_src, self.w_dst
        # <W x, a> = x (W^T a): scores from (d_in, heads) products, no projected destination
        a_dst = h_dst @ (w_dst.view(H, C, -1) * self.att_dst.view(H, C, 1)).sum(1).t()
        if project_first(len(h_src), len(h_dst), len(block.indices), h_src.shape[1], H, H * C):
            xs = project(h_src, w_src)
            a_src = (xs.view(-1, H, C) * self.att_src).sum(-1)
            out = attend(block, xs, a_src, a_dst, shared=False)
        else:  # sum_u alpha_u W_h x_u = W_h (sum_u alpha_u x_u): weigh raw rows, project the sums
            a_src = h_src @ (w_src.view(H, C, -1) * self.att_src.view(H, C, 1)).sum(1).t()
            agg = attend(block, h_src, a_src, a_dst, shared=True)
            w = w_src.view(H, C, -1)
            if matmul.current().bf16:  # the plan's bf16 products (fp32 accumulation), as _Project's
                out = per_head(agg.bfloat16(), w.bfloat16()).float()
            else:
                out = per_head(agg, w)
        return out + self.bias


class RGAT(nn.Module):
    """R-GAT (see the module doc).

    Args:
        in_dims: {node type: input width} in node type order (an int: untyped data);
        hidden: every attention layer's output width (heads x hidden/heads channels);
        num_classes: the output width of the final linear layer;
        num_layers: attention layers, one per block; edge_types: the canonical edge types;
        target_type: the node type whose outputs are returned (None: every type's, a link encoder);
        heads: attention heads (must divide hidden); dropout: probability after each hidden layer.
    """

    reads_16bit_input = False

    def __init__(self, in_dims, hidden: int, num_classes: int, num_layers: int, edge_types=(EDGE,),
                 target_type: str | None = NODE, heads: int = 4, dropout: float = 0.2):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
        if heads < 1 or hidden % heads:
            raise ValueError(f"heads ({heads}) must divide hidden ({hidden})")
        self.untyped = not isinstance(in_dims, dict)
        in_dims = {NODE: in_dims} if self.untyped else dict(in_dims)
        check_widths(in_dims)
        self.node_types, self.edge_types = list(in_dims), [tuple(e) for e in edge_types]
        self.target_type, self.heads, self.hidden = target_type, heads, hidden
        self.dropout = nn.Dropout(dropout)
        dims = in_dims
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(nn.ModuleDict({"__".join(e): RelationAttention(dims[e[0]], dims[e[2]], heads,
                                                                              hidden // heads)
                                              for e in self.edge_types}))
            dims = dict.fromkeys(dims, hidden)
        self.lin = nn.Linear(hidden, num_classes)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _computed(self, i: int) -> list[str]:
        """The node types layer i computes: all, but at the last layer only the target type."""
        return [self.target_type] if i == len(self.layers) - 1 and self.target_type is not None else self.node_types

    def product_shape(self, rows: int) -> tuple[int, int, int]:
        """(rows, d_in, hidden) of the widest input projection: it decides the engines."""
        w = max((conv.w_src for conv in self.layers[0].values()), key=lambda w: w.shape[1])
        return rows, w.shape[1], w.shape[0]

    def products(self, blocks: list[Block], batch=None) -> list[tuple[str, str, int, int, int]]:
        """A training step's matrix products (fastsample/nn/roofline.py), as RelationAttention
        runs them: per layer and relation into a computed type, the projection (of the
        sources, or of the destinations' per-head sums: project_first decides) and the
        scores' (rows, d_in) x (d_in, heads) products, forward, weight gradient and input
        gradient where the input takes one; then the final linear layer."""
        learnable = {t for t, v in (batch.inputs.items() if batch is not None and isinstance(batch.inputs, dict) else ())
                     if takes_grad(v)}
        out = []
        for i, block in enumerate(blocks):
            for r, e in enumerate(block.edge_types):
                s, _, d = e
                if d not in self._computed(i):
                    continue
                conv = self.layers[i]["__".join(e)]
                grad_s, grad_d = i > 0 or s in learnable, i > 0 or d in learnable
                width, d_in = conv.w_src.shape
                src, dst, edges = block.num_src_dict[s], block.num_dst_dict[d], len(block.csc(r)[1])
                name = f"{i}:{':'.join(e)}"
                ops = lambda grad: matmul.OPS[:3 if grad else 2]  # noqa: E731
                if project_first(src, dst, edges, d_in, self.heads, width):
                    out += [(f"{name}:project", op, src, d_in, width) for op in ops(grad_s)]
                else:  # the per-head sums' projection (the aggregation's gradient always flows), the sources' scores
                    out += [(f"{name}:project", op, dst, d_in, width) for op in matmul.OPS]
                    out += [(f"{name}:src scores", op, src, d_in, self.heads) for op in ops(grad_s)]
                out += [(f"{name}:dst scores", op, dst, conv.w_dst.shape[1], self.heads) for op in ops(grad_d)]
        rows = blocks[-1].num_dst_dict[self.target_type] if self.target_type is not None else blocks[-1].num_dst
        return out + [("lin", op, rows, *reversed(self.lin.weight.shape)) for op in matmul.OPS]

    def forward(self, blocks: list[Block], x) -> torch.Tensor:
        """The target type's outputs for the last block's destinations of that type (untyped:
        every destination's); without a target type, every destination's, in their order."""
        h = self._inputs(x)
        last = len(self.layers) - 1
        for i, block in enumerate(blocks):
            h = self._conv(i, block, h)
            if i < last:
                h = {t: dropout(F.leaky_relu(v, ACTIVATION_SLOPE), self.dropout) for t, v in h.items()}
        return self._output(blocks[-1], h)

    def layer(self, i: int, block: Block, h):
        """Layer i alone as in eval mode (LeakyReLU below the last layer, no dropout; the last
        adds the final linear layer), for layer-wise inference (fastsample/loading/layerwise.py)."""
        out = self._conv(i, block, self._inputs(h))
        if i < len(self.layers) - 1:
            out = {t: F.leaky_relu(v, ACTIVATION_SLOPE) for t, v in out.items()}
        else:
            out = {t: self.lin(v) for t, v in out.items()}
        return out[NODE] if self.untyped else out

    def _output(self, block: Block, h: dict) -> torch.Tensor:
        if self.target_type is not None:
            return self.lin(h[self.target_type])
        return self.lin(block.rows_in_dst_order(h))

    def _inputs(self, x) -> dict:
        return typed_inputs({NODE: x} if self.untyped else x, self.node_types)

    def _conv(self, i: int, block: Block, h: dict) -> dict:
        """Layer i before its activation: per computed destination type, the sum over its relations."""
        layer, out = self.layers[i], {t: None for t in self._computed(i)}
        for r, e in enumerate(block.edge_types):
            s, _, d = e
            if d not in out:
                continue
            y = layer["__".join(e)](block.relation_block(r), h[s], h[d][:block.num_dst_dict[d]])
            if out[d] is None:
                out[d] = y
            else:  # in place: the sum's terms are not needed again, and a new tensor per relation costs its pages
                out[d] += y
        return {t: (v if v is not None else h[t].new_zeros(block.num_dst_dict[t], self.hidden))
                for t, v in out.items()}
