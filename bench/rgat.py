"""R-GAT forward + backward per mini-batch: fastsample's native R-GAT against PyG's, same batches, same weights.

Samples --batches typed mini-batches from a typed dataset (fastsample's loader, one
process, the training seeds), and times on each, for each --threads count:

  fastsample   fastsample.nn.rgat.RGAT (native attention kernels, products on torch's BLAS)
  pyg          PyG's R-GAT as MLPerf's reference builds it: HeteroConv({relation:
               GATConv(d_in, hidden // heads, heads, add_self_loops=False)}, aggr="sum"),
               LeakyReLU between layers, a Linear on the target type; run on the blocks
               the way examples/pyg_rgat.py does (each layer's outputs cut to its destinations)

with the same weights (copied from fastsample's model into PyG's), in eval mode (no dropout: the
two draw dropout differently), the loss being cross-entropy against the batch's labels. The
outputs and input gradients of the two are compared on every batch (reported: the largest
difference relative to the largest magnitude). Featureless node types get random rows of
--embed-dim columns (what training gathers from the learnable embeddings). The implementations
alternate batch by batch, so that a drift of the machine touches both alike.

    python bench/rgat.py --data data/hetero-small                    # MLPerf's model settings
    python bench/rgat.py --data data/hetero-small --threads 1,2 --batches 8
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from fastsample.nn.matmul import cpu_summary
from fastsample.nn.rgat import ACTIVATION_SLOPE, RGAT
from fastsample.sampling import set_num_threads


def pyg_twin(model: RGAT):
    """PyG's R-GAT with ``model``'s weights: a list of HeteroConv and the final Linear."""
    from torch_geometric.nn import GATConv, HeteroConv

    convs = []
    for layer in model.layers:
        rel = {}
        for e in model.edge_types:
            ours = layer["__".join(e)]
            shared = hasattr(ours, "lin")
            ins = ours.w_src.shape[1] if shared else (ours.w_src.shape[1], ours.w_dst.shape[1])
            conv = GATConv(ins, ours.channels, heads=ours.heads, add_self_loops=False)
            with torch.no_grad():
                if shared:
                    conv.lin.weight.copy_(ours.lin.weight)
                else:
                    conv.lin_src.weight.copy_(ours.lin_src.weight)
                    conv.lin_dst.weight.copy_(ours.lin_dst.weight)
                for name in ("att_src", "att_dst", "bias"):
                    getattr(conv, name).copy_(getattr(ours, name))
            rel[e] = conv
        convs.append(HeteroConv(rel, aggr="sum"))
    lin = torch.nn.Linear(*reversed(model.lin.weight.shape))
    lin.load_state_dict(model.lin.state_dict())
    return convs, lin


def pyg_forward(convs, lin, blocks, x, target):
    h = x
    for i, (conv, block) in enumerate(zip(convs, blocks)):
        h = conv(h, block.edge_index_dict)
        h = {t: v[:block.num_dst_dict[t]] for t, v in h.items()}
        if i < len(convs) - 1:
            h = {t: F.leaky_relu(v, ACTIVATION_SLOPE) for t, v in h.items()}
    return lin(h[target])


def step(run, x, y):
    """One forward + backward; (seconds, output, input gradients)."""
    x = {t: v.detach().clone().requires_grad_() for t, v in x.items()}
    t0 = time.perf_counter()
    out = run(x)
    F.cross_entropy(out, y).backward()
    return time.perf_counter() - t0, out.detach(), {t: v.grad for t, v in x.items()}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--data", required=True, help="a typed dataset directory (python -m fastsample.data synth --preset hetero-small)")
    ap.add_argument("--fanouts", default="15,10,5", help="per layer, input layer first (default: MLPerf's 15,10,5)")
    ap.add_argument("--batch-size", type=int, default=512, help="seeds per batch (default: MLPerf's 512)")
    ap.add_argument("--hidden", type=int, default=512, help="(default: MLPerf's 512)")
    ap.add_argument("--heads", type=int, default=4, help="(default: MLPerf's 4)")
    ap.add_argument("--embed-dim", type=int, default=None, help="featureless types' row width (default: the widest feature)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default: 1,2)")
    ap.add_argument("--batches", type=int, default=6, help="timed batches per thread count (default: 6)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fanouts = [int(f) for f in args.fanouts.split(",")]
    ds = load_dataset(args.data)
    if ds.target_type is None:
        raise SystemExit(f"bench/rgat.py: {args.data} is not typed (no target type)")
    loader = NodeLoader(args.data, fanouts, args.batch_size, seed=args.seed)
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == args.batches + 1:  # the first warms up
            break
    widths = {t: int(f.shape[1]) for t, f in ds.features.items() if f is not None}
    embed = args.embed_dim or max(widths.values())
    gen = torch.Generator().manual_seed(args.seed)
    xs = [{t: (v.float() if v is not None else torch.randn(b.blocks[0].num_src_dict[t], embed, generator=gen))
           for t, v in b.x.items()} for b in batches]
    in_dims = {t: v.shape[1] for t, v in xs[0].items()}
    torch.manual_seed(args.seed)
    model = RGAT(in_dims, args.hidden, ds.num_classes, len(fanouts), ds.graph.edge_types, ds.target_type,
                 heads=args.heads).eval()
    convs, lin = pyg_twin(model)
    edges = [sum(len(b.mfgs[i].indices) for b in batches[1:]) / args.batches for i in range(len(fanouts))]
    print(f"# {cpu_summary()}; torch {torch.__version__}")
    print(f"# dataset {ds.name} ({ds.graph.num_nodes:,} nodes); fanouts {fanouts}, batch {args.batch_size}, "
          f"hidden {args.hidden}, heads {args.heads}, layers {len(fanouts)}, input widths {in_dims}; "
          f"{args.batches} batches, mean edges per layer {[round(e) for e in edges]}")
    print(f"{'threads':>7} {'fastsample ms':>14} {'pyg ms':>9} {'speed-up':>9}   largest difference: out (relative) "
          "input gradients (relative)")
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        set_num_threads(threads)
        times = {"fastsample": [], "pyg": []}
        diff_out = diff_grad = abs_out = abs_grad = 0.0
        for k, (batch, x) in enumerate(zip(batches, xs)):
            blocks, y = batch.blocks, batch.y
            a = step(lambda x: model(blocks, x), x, y)
            b = step(lambda x: pyg_forward(convs, lin, blocks, x, ds.target_type), x, y)
            if k == 0:
                continue
            times["fastsample"].append(a[0])
            times["pyg"].append(b[0])
            abs_out = max(abs_out, float((a[1] - b[1]).abs().max()))
            diff_out = max(diff_out, float((a[1] - b[1]).abs().max() / b[1].abs().max()))
            abs_grad = max(abs_grad, max(float((a[2][t] - b[2][t]).abs().max()) for t in x))
            diff_grad = max(diff_grad, max(float((a[2][t] - b[2][t]).abs().max() / b[2][t].abs().max().clamp(min=1e-30))
                                           for t in x))
        ours, theirs = statistics.median(times["fastsample"]), statistics.median(times["pyg"])
        print(f"{threads:>7} {ours * 1e3:>14.1f} {theirs * 1e3:>9.1f} {theirs / ours:>8.2f}x   {abs_out:.1e} "
              f"({diff_out:.1e}) {abs_grad:.1e} ({diff_grad:.1e})")


if __name__ == "__main__":
    main()
