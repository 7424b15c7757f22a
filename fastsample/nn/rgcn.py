"""R-GCN over typed blocks: the built-in model for typed (heterogeneous) data.

Each layer is DGL's ``HeteroGraphConv({relation: SAGEConv(mean)}, aggregate="sum")``,
numerically: for a destination node v of type t,

    h'_v = sum over relations r into t of  W_self_r h_v + W_neigh_r mean_{u in N_r(v)} h_u + b_r

followed, below the last layer, by ReLU and dropout. Node types without features take
their rows from learnable embedding tables that live outside the model, sharded over the
ranks and updated sparsely (fastsample/distributed/embedding.py; the loader gathers
their rows as it does features, and the model reads them where they landed, LearnableRows,
setting their gradient). The means run on the native kernels on the CPU
where built, else on a sparse product (backward: index_add_), to rounding the same numbers.
The last layer computes the target type only.

A layer is one autograd function (_Layer) with one product per destination type over
[h | a mean per relation into it]: each mean is written into its columns of that product's
input as it is made (no concatenation; with bf16 products made in bf16 as it is written, for
the forward and the weight gradient, and the output gradient converted once for both of its products);
only the spans whose rows take a gradient get an input gradient (the input layer's features
take none); each source type's gradient is made in one buffer, one native pass per relation
reading it; and ReLU with dropout is one native pass in place (sage.relu_dropout).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fastsample import bf16
from fastsample.nn import matmul
from fastsample.nn.block import Block, check_widths, typed_inputs
from fastsample.nn.sage import relu_dropout
from fastsample.native import lib as _native
from fastsample.rows import LearnableRows, RowTable, takes_grad, tensor_of


def _mean_backward(block: Block, g: torch.Tensor, grad: torch.Tensor, accumulate: bool = False,
                   g_self: torch.Tensor | None = None, act: dict | None = None) -> None:
    """grad (=, or += with ``accumulate``) the mean's backward, A^T (g / degree), plus
    ``g_self`` on its first rows: on the native kernel (mean_aggregate_backward, one pass, g
    and g_self may be column blocks of a wider gradient), else by index_add_ (any device).
    ``act`` (native only; see _Layer.backward): the same pass then also does the backward of
    the ReLU/dropout that made the rows (its "kept" bits and "scale"), sums the result's
    columns into act["bias_grad"] and writes it transposed into act["grad_t"] where given;
    with act["only_t"] ``grad`` is itself the (width, rows) transpose, and not accumulated."""
    if _native is not None and g.device.type == "cpu":
        if act is None:
            _native.mean_aggregate_backward(block.indptr, block.indices, g, g_self, None, 1.0, grad, None, False,
                                            accumulate)
        else:
            only_t = act["only_t"]
            _native.mean_aggregate_backward(block.indptr, block.indices, g, g_self, act["kept"], act["scale"], grad,
                                            act["bias_grad"], only_t, accumulate, act.get("grad_t"), True)
        return
    if not accumulate:
        grad.zero_()
    if g_self is not None:
        grad[:g_self.shape[0]] += g_self
    src, dst = block.edge_index
    degree = torch.bincount(dst, minlength=block.num_dst).clamp_min(1).to(g.dtype)
    grad.index_add_(0, src, (g / degree[:, None])[dst])


class _Mean(torch.autograd.Function):
    """mean_{u in N(v)} h[u] per destination, and its backward (_mean_backward)."""

    @staticmethod
    def forward(ctx, h, block):
        out = torch.empty(block.num_dst, h.shape[1], dtype=torch.float32, device=h.device)
        _mean_into(block, h, out)
        ctx.block, ctx.num_src = block, h.shape[0]
        return out

    @staticmethod
    def backward(ctx, g):
        grad = torch.empty(ctx.num_src, g.shape[1], dtype=torch.float32, device=g.device)
        _mean_backward(ctx.block, g.contiguous(), grad)
        return grad, None


def mean(block: Block, h) -> torch.Tensor:
    """The mean of each destination's in-neighbours' rows of ``h`` (0 without edges): a
    tensor (autograd sees it), or a row table (fastsample/rows.py), read where its rows are."""
    if isinstance(h, RowTable):
        out = torch.empty(block.num_dst, h.width, dtype=torch.float32)
        _mean_into(block, h, out)
        return out
    return _Mean.apply(h, block)


def _takes_grad(h) -> bool:
    """Whether ``h``'s rows take a gradient here: a tensor autograd needs one of, or
    learnable rows read in place (LearnableRows: _Layer's backward sets their .grad)."""
    return torch.is_grad_enabled() and takes_grad(h)


def _self_rows(h, n: int, out: torch.Tensor) -> None:
    """``out`` (float32 or bfloat16) = rows [0, n) of ``h`` (the destinations', first among the sources)."""
    if isinstance(h, RowTable):
        h.copy_into(out)
    else:
        out.copy_(tensor_of(h, n))


def _mean_into(block: Block, h, out: torch.Tensor) -> None:
    """``out`` (rows apart: a column block of a product's input; float32, or bfloat16 for bf16
    products, rounded once as torch rounds) = ``mean(block, h)``, in place."""
    if isinstance(h, RowTable) and h.readable:
        h.mean_into(block.indptr, block.indices, out, with_self=False)
    elif isinstance(h, RowTable):
        _mean_into(block, tensor_of(h).float(), out)
    elif _native is not None and h.device.type == "cpu" and h.dtype == torch.float32:
        _native.mean_aggregate(block.indptr, block.indices, h.contiguous(), bf16.bits(out))
    else:
        out.copy_(block.mean(h.float()))


class _Layer(torch.autograd.Function):
    """One layer's products, z_t @ w_t^T + b_t per computed destination type t, where z_t =
    [h_t | a mean per relation into t] is made here (each mean written into its columns);
    ``spec``: _LayerSpec. The backward gives the weights and biases their gradients, takes
    input gradients only for the column spans whose rows take one (the input layer's
    features take none), in one product per run of adjacent such spans, and gives each
    source type that takes a gradient one buffer: one pass per relation that reads the type
    (_mean_backward: the first writes it, with the type's own span on its first rows, the
    others add), where autograd would pad the self rows' slice with zeros and add whole
    tensors, one per use."""

    @staticmethod
    def forward(ctx, spec, *tensors):
        P, T = len(spec.passed), len(spec.types)
        h = {**spec.h, **dict(zip(spec.passed, tensors[:P]))}
        ws, bs = tensors[P:P + T], tensors[P + T:]
        plan, zs, outs = matmul.current(), [], []
        for (t, n, spans), w, b in zip(spec.types, ws, bs):
            # bf16 products read z in bf16 (forward and weight gradient): made so as it is written
            z = torch.empty(n, w.shape[1], device=w.device, dtype=torch.bfloat16 if plan.bf16 else torch.float32)
            for s, rel, a, e in spans:
                if rel is None:
                    _self_rows(h[s], n, z[:, a:e])
                else:
                    _mean_into(rel, h[s], z[:, a:e])
            zs.append(z)
            outs.append(plan.forward(z, w, b))
        ctx.spec, ctx.zs, ctx.plan = spec, zs, plan
        ctx.num_src = [h[s].shape[0] for s in spec.grad_types]
        ctx.save_for_backward(*ws)
        ctx.set_materialize_grads(False)  # an output the loss does not read: its type's weights get no gradient
        return tuple(outs)

    @staticmethod
    def backward(ctx, *gs):
        spec, plan, ws = ctx.spec, ctx.plan, ctx.saved_tensors
        P, T = len(spec.passed), len(spec.types)
        need_w, need_b = ctx.needs_input_grad[1 + P:1 + P + T], ctx.needs_input_grad[1 + P + T:]
        own = {s: None for s in spec.grad_types}  # type -> its own span's gradient (rows [0, n))
        reads = {s: [] for s in spec.grad_types}  # type -> [(relation block, its span's gradient)]
        gws, gbs = [], []
        for k, ((t, n, spans), w, z, g) in enumerate(zip(spec.types, ws, ctx.zs, gs)):
            if g is None or n == 0:  # nothing read this output, or the type has no rows this step: no gradient
                gws.append(None)
                gbs.append(None)
                continue
            g = plan.output_grad(g)  # g^T whole where the ReLU's backward wrote it so
            link = spec.links.get(t, {}) if spec.links is not None else {}
            g_t, bias_grad = link.pop("g_t", None), link.pop("bias_grad", None)  # made by the ReLU's backward
            gbs.append((g.sum(0) if bias_grad is None else bias_grad) if need_b[k] else None)
            g_p = plan.operand(g)  # as the products read it (bf16: converted once, for both; no g_t then)
            gws.append(plan.weight_grad(g_p if g_t is None else g_t.t(), z) if need_w[k] else None)
            for run in _runs([x for x in spans if x[0] in own]):
                first = run[0][2]
                gz = plan.input_grad(g_p, w[:, first:run[-1][3]])
                for s, rel, a, e in run:
                    if rel is None:
                        own[s] = gz[:, a - first:e - first]
                    else:
                        reads[s].append((rel, gz[:, a - first:e - first]))
        grads = {}
        for s, num_src in zip(spec.grad_types, ctx.num_src):
            g_own, rels = own[s], reads[s]
            if g_own is None and not rels:
                grads[s] = None
                continue
            width = (g_own if g_own is not None else rels[0][1]).shape[1]
            device = ws[0].device
            # the own span rides with a relation over as many destinations (its rows), else is added after
            carrier = next((j for j, (rel, _) in enumerate(rels) if g_own is not None
                            and rel.num_dst == g_own.shape[0]), None)
            act = _activation(spec.below, s, rels, g_own is None or carrier is not None, num_src, device)
            if act is not None and act["only_t"]:  # one pass, written transposed: the gradient's only form
                grad = torch.empty(width, num_src, dtype=torch.float32, device=device)
            else:
                # the first relation's pass writes every row; with none, only the own span adds to zeros
                grad = (torch.empty if rels else torch.zeros)(num_src, width, dtype=torch.float32, device=device)
            for j, (rel, g_rel) in enumerate(rels):
                _mean_backward(rel, g_rel, grad, accumulate=j > 0, g_self=g_own if j == carrier else None,
                               act=act if j == len(rels) - 1 else None)
            if g_own is not None and carrier is None:
                grad[:g_own.shape[0]] += g_own
            grads[s] = grad if act is None else _made(act, grad)
        for s in spec.grad_types:
            if isinstance(spec.h.get(s), LearnableRows):  # read in place: no autograd input to return it to
                spec.h[s].grad = grads[s]
        return (None, *(grads[s] for s in spec.passed), *gws, *gbs)


def _activation(below: dict | None, s: str, rels: list, own_rides: bool, num_src: int, device) -> dict | None:
    """The link of the native ReLU/dropout that made type ``s``'s ``num_src`` rows
    (sage._ReluDropout: its kept bits, scale and ``transposed``), with room for what its
    backward makes (the bias gradient; the transpose the product below reads, unless one
    pass writes it alone: "only_t"), where the last relation's pass of _Layer.backward can
    make it (``rels``, and the own span, if any, riding on one of them: ``own_rides``), so
    that no pass of its own runs over the gradient; else None. The pass applies the same
    kept bits to the same sums, so the same bits come out."""
    act = below.get(s) if below is not None else None
    if act is None or "kept" not in act or not rels or not own_rides or _native is None or device.type != "cpu":
        return None
    width = rels[0][1].shape[1]
    act["bias_grad"] = torch.empty(width, dtype=torch.float32)
    act["only_t"] = act["transposed"] and len(rels) == 1  # one pass: it writes the transpose alone
    if not act["only_t"] and (act["transposed"] or matmul.current().reads_transposed_grad):
        act["grad_t"] = torch.empty(width, num_src, dtype=torch.float32, device=device)
    return act


def _made(act: dict, grad: torch.Tensor) -> torch.Tensor:
    """The pre-activation gradient that _Layer.backward made for a ReLU/dropout (``act``:
    _activation's), as that backward would have returned it; its other outputs left in the
    link for the product below (sage._ReluDropout, rgcn._Layer), which it then passes on."""
    act["made"] = True
    del act["kept"]
    if act.pop("only_t"):
        return grad.t()
    grad_t = act.pop("grad_t", None)
    if act["transposed"]:
        return grad_t.t()
    if grad_t is not None:
        act["g_t"] = grad_t
    return grad


def _runs(spans: list) -> list[list]:
    """``spans`` ((type, relation, start, end), in column order) grouped into runs of adjacent ones."""
    runs = []
    for x in spans:
        if runs and runs[-1][-1][3] == x[2]:
            runs[-1].append(x)
        else:
            runs.append([x])
    return runs


@dataclass
class _LayerSpec:
    """What _Layer reads besides its tensors: per computed type (type, destinations,
    [(source type, relation block or None for the type's own rows, first column, end column)]),
    the input rows not passed as tensors (h: those that take no gradient, and LearnableRows),
    the types whose rows take a gradient (grad_types), those of them passed as tensors
    (passed, in the order of _Layer's tensors), the links shared with the ReLUs after it
    and those of the ReLUs that made its input rows (below: their backward is made in this
    layer's, _activation)."""

    types: list
    h: dict
    grad_types: list
    passed: list
    links: dict | None
    below: dict | None = None


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
    reads_learnable_rows = True

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
        of the spans that take one (above the input layer, those of types some relation flows
        into; there, a learnable embedding's)."""
        learnable = {t for t, v in (batch.inputs.items() if batch is not None else ()) if takes_grad(v)}
        out = []
        for i, block in enumerate(blocks):
            n = self.layers[i]["__".join(self.edge_types[0])].self_lin.out_features
            for d in self._computed(i):
                spans = self._spans(i, d)
                k = sum(width for _, width in spans)
                # above the input layer a span takes a gradient where its rows are a layer's
                # output: not a type nothing flows into (its rows are zeros, _conv)
                k_grad = sum(width for t, width in spans if (self._spans(i - 1, t) if i > 0 else t in learnable))
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
        last, below = len(self.layers) - 1, None
        for i, block in enumerate(blocks):
            weight_only, links = set(), ({} if i < last else None)
            h = self._conv(i, block, h, weight_only, links, below)
            if i < last:  # a product with no input gradient reads its output's gradient only transposed
                # each output feeds the next layer alone, which may make its ReLU's backward (_activation)
                h = {t: relu_dropout(v, self.dropout, t in weight_only, links.get(t)) for t, v in h.items()}
                below = links
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

    def _conv(self, i: int, block: Block, h: dict, weight_only: set | None = None, links: dict | None = None,
              below: dict | None = None) -> dict:
        """Layer i before its activation: per destination type t, the sum over its relations r
        of W_self_r h + b_r + W_neigh_r mean_r, as one product: z = [h | mean_r1 | mean_r2 ...]
        times [sum_r W_self_r | W_neigh_r1 | W_neigh_r2 ...] plus sum_r b_r (the self terms
        of all relations share h: one product for them, not one per relation). Each mean is
        written into its columns of z as it is made; only the spans whose rows take a
        gradient get an input gradient (_Layer: all the layer's types in one autograd
        function); the types whose product takes none are added to ``weight_only``.
        ``links``: {type: a dict its product shares with the ReLU after it} is filled where
        given (sage.relu_dropout: that pass makes the product's bias gradient, and its output
        gradient transposed, for it). ``below``: the links of the ReLUs that made ``h`` (the
        layer below's), whose backward this layer's may make (_activation)."""
        layer, zeros, types, ws, bs = self.layers[i], {}, [], [], []
        grad_types = [s for s in self.node_types if _takes_grad(h[s])]
        for t in self._computed(i):
            into = [(r, e) for r, e in enumerate(block.edge_types) if e[2] == t]
            n = block.num_dst_dict[t]
            if not into:
                lin = layer["__".join(self.edge_types[0])].self_lin
                zeros[t] = lin.weight.new_zeros(n, lin.out_features)
                continue
            convs = [layer["__".join(e)] for _, e in into]
            ws.append(torch.cat([sum(c.self_lin.weight for c in convs)] + [c.neigh_lin.weight for c in convs], dim=1))
            bs.append(sum(c.self_lin.bias for c in convs))
            spans, at = [], 0
            for rel, s in [(None, t)] + [(block.relation_block(r), e[0]) for r, e in into]:
                width = h[s].shape[1]  # a tensor's or a row table's
                spans.append((s, rel, at, at + width))
                at += width
            types.append((t, n, spans))
            if weight_only is not None and not any(s in grad_types for s, *_ in spans):
                weight_only.add(t)
            if links is not None:
                links.setdefault(t, {})
        passed = [s for s in grad_types if isinstance(h[s], torch.Tensor)]  # LearnableRows take theirs in .grad
        spec = _LayerSpec(types, {s: v for s, v in h.items() if s not in passed}, grad_types, passed, links, below)
        outs = dict(zip([t for t, _, _ in types], _Layer.apply(spec, *(h[s] for s in passed), *ws, *bs)))
        return {t: outs[t] if t in outs else zeros[t] for t in self._computed(i)}


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
