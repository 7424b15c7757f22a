"""GraphSAGE (mean aggregator) over MFGs.

Layer l maps source rows h_src (num_src, d_in) to destination rows (num_dst, d_out):

    out = W_self h_src[:num_dst] + W_neigh mean_{u in N(v)} h_src[u] + b

(DGL's SAGEConv 'mean', same weights, same outputs.) The mean is taken before the
projection, at width d_in, with no per-edge message tensors. Two paths:
  * "native" (CPU, float32): each layer is one autograd Function (_NativeSAGE) on the
    C++/OpenMP kernels of native/aggregate.cpp. Forward writes the mean beside h_dst in one
    buffer Z = [h_dst | mean] (summed in fp32, stored in fp32, or in bf16 where the products
    are bf16; the input layer reads float32, bfloat16 or float16 features as they come) and
    projects it with one matmul (fastsample/nn/matmul.py picks the engine, and bf16 products
    where they pay), then adds the bias and applies
    ReLU and dropout in one pass, in place (native/activation.cpp: counter-based keep bits,
    ~20x cheaper than torch's bernoulli_). Backward is one matmul for both weights (Z^T g), one for Z's gradient, and
    one native pass that scatters the mean's gradient to the sources, adds the self term,
    and applies the lower layer's ReLU/dropout mask (read off this layer's input, which is
    that layer's output), summing the result's columns as it goes: the lower layer's bias
    gradient. No temporaries beyond Z and the gradients themselves.
  * "torch": nn.Linear + a sparse CSR x dense product, the plain-PyTorch reference the
    tests compare against (also the path on GPUs and without the native module). On the
    CPU with the native module built it drops out with the native masks, so both paths
    give the same numbers; otherwise it uses nn.Dropout.
Both paths hold the same parameters (self_lin.weight/bias, neigh_lin.weight).
"""

from __future__ import annotations

import torch
from torch import nn

from fastsample import bf16
from fastsample.nn import matmul
from fastsample.nn.block import Block

from fastsample.native import lib as _native
from fastsample.native import require
from fastsample.rows import RowTable, tensor_of

AGGREGATIONS = ("auto", "native", "torch")
HALF = (torch.bfloat16, torch.float16)


def dropout_seed() -> int:
    """From torch's generator, so torch.manual_seed fixes the native dropout masks."""
    return int(torch.randint(0, 2**62, (1,)).item())


def _hashed_drop(h: torch.Tensor, module: nn.Dropout) -> bool:
    """Whether ``module`` drops elements of ``h`` by the hashed keep bits (training, p > 0,
    a 2-D float32 tensor, on any device): the rule every path shares, so a seed gives the
    same masks on the native kernels, without them and on a GPU."""
    return module.training and module.p > 0 and h.dtype == torch.float32 and h.dim() == 2


def _native_drop(h: torch.Tensor, module: nn.Dropout) -> bool:
    """Whether the hashed keep bits of ``h`` are drawn by the native kernels (a CPU tensor,
    the module built)."""
    return _hashed_drop(h, module) and _native is not None and h.device.type == "cpu"


_LOW32 = 0xFFFFFFFF


def _lowbias32(x: torch.Tensor) -> torch.Tensor:
    """native/activation.cpp's mixer on int64 lanes holding uint32 values (a product's
    bits above 32 may wrap: only its low word is kept)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _LOW32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _LOW32
    return x ^ (x >> 16)


def keep_mask(h: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The keep-scaled mask of ``h`` (its shape, float32, its device) that
    ``native.dropout_mask`` draws from ``seed``, in torch's integer ops: on a GPU, and on
    a CPU without the native module."""
    k = torch.arange(h.numel(), device=h.device, dtype=torch.int64)
    s1, s2 = seed & _LOW32, (seed >> 32) & _LOW32
    high = s2 ^ (((k >> 32) * 0x9E3779B9) & _LOW32)
    bits = _lowbias32((_lowbias32((k & _LOW32) ^ s1) + high) & _LOW32)
    kept = (bits >> 8) >= int(p * 16777216.0 + 0.5)
    return kept.view(h.shape).to(torch.float32) * torch.tensor(1.0 / (1.0 - p), dtype=torch.float32)


def dropout(h: torch.Tensor, module: nn.Dropout) -> torch.Tensor:
    """``module`` applied to ``h``, by the hashed keep bits where they apply (a hash of the
    seed and the element, the same on any thread count and device, the draws the fused
    native layers make; torch's bernoulli_ is ~20x slower on the CPU): the plain-PyTorch
    GraphSAGE, the R-GCN and the R-GAT."""
    if not _hashed_drop(h, module):
        return module(h)
    if _native_drop(h, module):
        mask = torch.empty_like(h)
        _native.dropout_mask(mask, module.p, dropout_seed())
    else:
        mask = keep_mask(h, module.p, dropout_seed())
    return h * mask


class _ReluDropout(torch.autograd.Function):
    """dropout(relu(v)) in place on v in one native pass (the keep bits dropout() draws);
    the backward reads which outputs were kept (> 0) from one bit each, written by the same
    pass (native/kept_bits.hpp). With ``transposed`` the gradient is made as its transpose,
    whole (a view of it returned). ``link``: None, or a dict shared with the product whose
    output v is (fastsample/nn/rgcn.py's _Layer): the same pass then also leaves there
    that product's bias gradient ("bias_grad", the gradient's column sums) and, when the
    product's weight gradient reads the gradient transposed (matmul.Plan.reads_transposed_grad)
    and the gradient is not already made so, its transpose ("g_t", whole). The forward leaves
    its kept bits, scale and ``transposed`` in the link too: the one layer that reads the
    output (the R-GCN's next _Layer) may make all of that in its own backward pass, and says
    so ("made"): the gradient it returns is then already the pre-activation one, passed on."""

    @staticmethod
    def forward(ctx, v, p, seed, transposed=False, link=None):
        kept = kept_bits(v.shape[0], v.shape[1])
        _native.bias_relu_dropout(v, torch.zeros(v.shape[1]), p, seed, kept)
        ctx.mark_dirty(v)
        ctx.save_for_backward(kept)
        ctx.scale, ctx.transposed, ctx.link = 1.0 / (1.0 - p), transposed, link
        if link is not None:
            link.update(kept=kept, scale=ctx.scale, transposed=transposed)
        return v

    @staticmethod
    def backward(ctx, g):
        link = ctx.link
        if link is not None and link.pop("made", False):  # the layer above made this backward's outputs
            return g, None, None, None, None
        kept, = ctx.saved_tensors
        g = g.contiguous()
        rows, width = g.shape
        grad = None if ctx.transposed else torch.empty_like(g)
        grad_t = torch.empty(width, rows, dtype=g.dtype) if ctx.transposed or (
            link is not None and matmul.current().reads_transposed_grad) else None
        col_sum = torch.empty(width, dtype=torch.float32) if link is not None else None
        _native.relu_dropout_backward(g, kept, ctx.scale, grad, grad_t, col_sum)
        if link is not None:
            link["bias_grad"] = col_sum
            if grad is not None and grad_t is not None:
                link["g_t"] = grad_t
        return (grad_t.t() if grad is None else grad), None, None, None, None


def kept_bits(rows: int, width: int) -> torch.Tensor:
    """Room for the kept bits of a (rows, width) ReLU/dropout output (native/kept_bits.hpp)."""
    return torch.empty(rows, (width + 7) // 8, dtype=torch.uint8)


def relu_dropout(v: torch.Tensor, module: nn.Dropout, transposed_grad: bool = False,
                 link: dict | None = None) -> torch.Tensor:
    """``dropout(relu(v), module)``; on the native kernels in one pass, in place on ``v``
    (a product's output that nothing else holds). ``transposed_grad``: v's gradient goes
    only to a weight gradient, which reads it transposed; on the native pass it is made so
    (the same values, no copy before that product). ``link``: see _ReluDropout (left
    empty off the native pass)."""
    if _native_drop(v, module) and v.is_contiguous():
        return _ReluDropout.apply(v, module.p, dropout_seed(), transposed_grad, link)
    return dropout(torch.relu(v), module)


class _NativeSAGE(torch.autograd.Function):
    """One layer on the native kernels; see the module docstring.

    `drop` is None (no activation) or the dropout probability applied after bias + ReLU
    (0 in eval), its keep bits drawn from `seed` (native/activation.cpp). `in_scale` is
    None when h is a plain input, else the keep-scale 1/(1-p) of the ReLU+dropout that
    produced h: the gradient this layer returns for h is then already the
    gradient of the lower layer's pre-activation, and that layer's backward takes it as is.
    So an activated output must feed exactly one _NativeSAGE with in_scale set, which is
    how GraphSAGE wires them and why this class is private.

    `link` is None or (this layer's slot, the lower layer's slot or None): dicts of one
    forward pass. An activated layer leaves its output's kept bits in its slot ("kept",
    native/kept_bits.hpp): the layer above reads which of its inputs were kept from them, one
    bit each, not from h itself, which it then need not keep. The backward pass that makes
    the lower layer's output gradient (in_scale set) also sums its columns in the same pass,
    and leaves them in the lower slot as that layer's bias gradient, so it takes no pass of
    its own over its gradient (g.sum(0)).
    A layer that takes no input gradient (the input layer) marks its slot "transposed": its
    output gradient then only feeds its weight gradient, which reads it as g^T, so the layer
    above writes it so (the same values; oneDNN would otherwise copy g into g^T first).
    """

    @staticmethod
    def forward(ctx, h, w_self, bias, w_neigh, block, drop, seed, in_scale, link=None):
        d, n = h.shape[1], block.num_dst
        plan = matmul.current()
        # z = [h[:n] | mean], summed in fp32 whatever h's dtype; stored in bf16 where the products read
        # it so (forward and weight gradient: half the bytes kept, no conversion pass)
        z = torch.empty(n, 2 * d, dtype=torch.bfloat16 if plan.bf16 else torch.float32)
        aggregate(block, h, z)
        w = torch.cat([w_self, w_neigh], 1)
        if drop is None:
            out = plan.forward(z, w, bias)
        else:  # bias, ReLU and dropout in one pass (a fused bias would first be copied everywhere)
            out = plan.forward(z, w)
            kept = kept_bits(*out.shape) if link is not None else None
            _native.bias_relu_dropout(out, bias.detach(), drop, seed, kept)
            if kept is not None:
                link[0]["kept"] = kept
        below_kept = link[1]["kept"] if in_scale is not None else None
        ctx.save_for_backward(z, w, below_kept)
        ctx.block, ctx.num_src, ctx.in_scale, ctx.plan, ctx.h_dtype = block, h.shape[0], in_scale, plan, h.dtype
        ctx.link = link if link is not None else (None, None)
        if link is not None and not ctx.needs_input_grad[0]:
            # no input gradient here (the input layer): the output gradient feeds only the weight
            # gradient, which reads it transposed; the layer above writes it so (no copy, see backward)
            link[0]["transposed"] = True
        return out

    @staticmethod
    def backward(ctx, g):
        z, w, kept = ctx.saved_tensors
        d = z.shape[1] // 2
        g = ctx.plan.output_grad(g)
        g_p = ctx.plan.operand(g)  # bf16 products: converted once, for both gradients
        grad_w = ctx.plan.weight_grad(g_p, z)  # (d_out, 2 d): [w_self | w_neigh]'s gradient
        grad_h = None
        own, below = ctx.link
        if ctx.needs_input_grad[0]:
            gz = ctx.plan.input_grad(g_p, w)
            transposed = below is not None and below.get("transposed", False)
            grad_h = torch.empty((d, ctx.num_src) if transposed else (ctx.num_src, d), dtype=torch.float32)
            scale = 1.0 if ctx.in_scale is None else ctx.in_scale
            col_sum = torch.empty(d, dtype=torch.float32) if below is not None else None  # set with in_scale only
            _native.mean_aggregate_backward(ctx.block.indptr, ctx.block.indices, gz[:, d:], gz[:, :d], kept,
                                            scale, grad_h, col_sum, transposed)
            if col_sum is not None:
                below["bias_grad"] = col_sum
            grad_h = (grad_h.t() if transposed else grad_h).to(ctx.h_dtype)
        grad_bias = own.pop("bias_grad", None) if own is not None else None
        return (grad_h, grad_w[:, :d], g.sum(0) if grad_bias is None else grad_bias, grad_w[:, d:],
                None, None, None, None, None)


def aggregate(block: Block, h, z: torch.Tensor) -> None:
    """z = [h[:num_dst] | mean of the in-neighbours' rows] (or only the mean, if z is as wide
    as h), summed in fp32, stored as z's dtype (float32, or bfloat16 rounded as torch rounds),
    on the native kernel; h float32, bfloat16 or float16 (read as is), or a row table of them
    (fastsample/rows.py: the gathered rows read where they are)."""
    if isinstance(h, RowTable):
        h.mean_into(block.indptr, block.indices, z, with_self=z.shape[1] == 2 * h.width)
    elif h.dtype == torch.float32:
        _native.mean_aggregate(block.indptr, block.indices, h, bf16.bits(z))
    elif h.dtype in HALF:
        _native.mean_aggregate_half(block.indptr, block.indices, h.view(torch.uint16), bf16.bits(z),
                                    h.dtype == torch.bfloat16)
    else:
        raise TypeError(f"features must be float32, bfloat16 or float16 (got {h.dtype})")


class SAGEConv(nn.Module):
    """The reference layer (plain PyTorch); GraphSAGE runs the same parameters natively.

    Args:
        in_dim, out_dim: the widths of the source rows and of the output rows.
    """

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.self_lin = nn.Linear(in_dim, out_dim)
        self.neigh_lin = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        return self.self_lin(h_src[: block.num_dst]) + self.neigh_lin(block.mean(h_src))


class GraphSAGE(nn.Module):
    """GraphSAGE (mean aggregator) over MFGs; see the module docstring.

    Args:
        in_dim: feature width; hidden: hidden width; num_classes: output width;
        num_layers: layers (>= 1), one per MFG; dropout: probability after each hidden layer;
        aggregation: auto (native where it runs, else torch), native or torch.

    What a trainer may ask of a model (capabilities, not its class): ``reads_16bit_input``
    (its first layer takes bfloat16/float16 features as they are), ``reads_row_tables``
    (x may be a row table, fastsample/rows.py: its first layer reads the gathered rows
    where they are, no copy into one matrix first), ``product_shape(rows)``
    (its widest matrix product, for fastsample/nn/matmul.py's engine choice).
    """

    reads_16bit_input = True
    reads_row_tables = True

    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int, dropout: float = 0.5,
                 aggregation: str = "auto"):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)} (got {aggregation!r})")
        if aggregation == "native":
            require("GraphSAGE(aggregation='native')")
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = nn.Dropout(dropout)
        self.aggregation = aggregation

    def product_shape(self, rows: int) -> tuple[int, int, int]:
        """(rows, 2 d_in, d_out) of the input layer's product over ``rows`` destinations: the
        widest of the model, which decides the engines (fastsample/nn/matmul.py)."""
        w = self.layers[0].self_lin.weight
        return rows, 2 * w.shape[1], w.shape[0]

    def products(self, blocks: list[Block]) -> list[tuple[int, str, int, int, int]]:
        """A training step's matrix products, (layer, op, rows, k, n) each (fastsample/nn/roofline.py):
        per layer the forward (rows, 2 d_in) x (2 d_in, d_out), the weight gradient, and the
        input gradient except at the input layer (features need none)."""
        out = []
        for i, (conv, block) in enumerate(zip(self.layers, blocks)):
            d_out, d_in = conv.self_lin.weight.shape
            out += [(i, op, block.num_dst, 2 * d_in, d_out) for op in matmul.OPS[:2 if i == 0 else 3]]
        return out

    def forward(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        """blocks[i] feeds layer i (blocks[0] consumes the input features x).

        Args:
            blocks: one Block per layer, input side first; x: the input nodes' features.
        Returns:
            The logits of blocks[-1]'s destination nodes, (num_dst, num_classes).
        """
        if isinstance(x, RowTable):
            if x.readable and self.aggregation != "torch":
                return self._forward_native(blocks, x)
            x = tensor_of(x)
        if self._native_layers(x):
            return self._forward_native(blocks, x)
        x = x.float()  # 16-bit features: the plain-PyTorch layers compute in fp32
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = dropout(torch.relu(h), self.dropout)  # the native path's draws where it runs
        return h

    def _native_layers(self, x: torch.Tensor) -> bool:
        """Whether the layers run as _NativeSAGE (the native module on the CPU; the input
        layer reads float32, bfloat16 or float16 features, the others are float32)."""
        return (_native is not None and x.device.type == "cpu" and x.dtype in (torch.float32, *HALF)
                and self.aggregation != "torch")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def layer(self, i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
        """Layer i alone as in eval mode (activation included, no dropout): in eval mode,
        forward(blocks, x) is these applied in turn, which exact layer-wise inference
        (fastsample/loading/layerwise.py) relies on."""
        last = i == len(self.layers) - 1
        if self._native_layers(h):
            conv = self.layers[i]
            return _NativeSAGE.apply(h.contiguous(), conv.self_lin.weight, conv.self_lin.bias, conv.neigh_lin.weight,
                                     block, None if last else 0.0, 0, None)
        h = self.layers[i](block, h.float())
        return h if last else torch.relu(h)

    def _forward_native(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        p = self.dropout.p if self.training else 0.0
        h, in_scale = x if isinstance(x, RowTable) else x.contiguous(), None
        slots = [{} for _ in self.layers]  # bias gradients handed down in backward (_NativeSAGE's link)
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            drop = p if i < len(self.layers) - 1 else None
            seed = dropout_seed() if drop else 0
            link = (slots[i], slots[i - 1] if in_scale is not None else None)
            h = _NativeSAGE.apply(h, layer.self_lin.weight, layer.self_lin.bias, layer.neigh_lin.weight, block,
                                  drop, seed, in_scale, link)
            in_scale = None if drop is None else 1.0 / (1.0 - drop)
        return h
