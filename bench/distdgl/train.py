"""DistDGL trainer, untyped (GraphSAGE) or typed (R-GCN), on DGL's dgl.distributed (1.1.3, or
2.1 with --graphbolt: GraphBolt's sampler on the servers), timed per phase.

Started by run_distdgl.sh / machine.sh (one graph server + one trainer per simulated machine,
DGL_ROLE=client, DGL_DIST_MODE=distributed) on a partition written by partition.py (its
info.json, next to the partition config, names the kind, the graph, the target type, the
featured types' widths, the featureless types and the classes).

Untyped model (fastsample/nn/sage.py's GraphSAGE): per layer SAGEConv(in, out, 'mean'), i.e.
W_self h_dst + W_neigh mean(h_src) + b; ReLU + dropout below the last layer.
Typed model (fastsample/nn/rgcn.py's R-GCN): per layer HeteroGraphConv({rel: SAGEConv(in, out, 'mean')},
aggregate='sum'), i.e. per destination type the sum over its relations of
W_self h_dst + W_neigh mean(h_src) + b; ReLU + dropout below the last layer; the last layer's
outputs of the target type go to cross-entropy. Featured types read their features; each
featureless type reads a dgl.distributed.DistEmbedding (--embed_dim wide, N(0,1) rows, as
fastsample's), updated by dgl.distributed.optim.SparseAdam (--embed_lr).
Both: dense gradients all-reduced explicitly over gloo as one flat bucket (no DDP), Adam (--lr).
Sampling: DistNodeDataLoader + MultiLayerNeighborSampler(--fanouts, input layer first), which
on a heterograph samples that many in-neighbours per node and per relation (DGL's int fanout).
With --graphbolt the trainer and (USE_GRAPHBOLT=1, machine.sh) the servers call
initialize(..., use_graphbolt=True): the servers sample their partition's FusedCSCSamplingGraph
(partition.py --graphbolt) with GraphBolt's kernels; the loader and the rest are the same.

Per epoch (epoch 0 = warm-up) each trainer logs one JSON line with
  sample_s     time in next(dataloader)
  fetch_s      feature, embedding-row and label reads (DistTensor / DistEmbedding pulls)
  compute_s    forward + loss + backward
  allreduce_s  the dense gradients' all-reduce (one flat bucket, gloo)
  optimizer_s  the dense Adam step
  embed_update_s  SparseAdam.step(): the embedding gradients exchanged between trainers and
               the rows updated in the KV store (fastsample's embed_grads_s + embed_update_s)
and the epoch wall time (epoch_s; epoch_s_max_over_trainers).
"""
import argparse, json, os, resource, socket, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(allow_abbrev=False, )
p.add_argument("--mode", choices=["dist"], default="dist")
p.add_argument("--part_config", required=True)
p.add_argument("--ip_config", default="ip_config.txt")
p.add_argument("--machine_id", type=int, default=None)
p.add_argument("--world_size", type=int, default=1)
p.add_argument("--torch_port", type=int, default=29531)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--max_steps", type=int, default=0, help="cap steps per epoch (0: full epoch)")
p.add_argument("--batch_size", type=int, default=1024)
p.add_argument("--fanouts", default="15,10")
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--dropout", type=float, default=0.5)
p.add_argument("--lr", type=float, default=0.006)
p.add_argument("--embed_lr", type=float, default=0.01)
p.add_argument("--embed_dim", type=int, default=64)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", default=None, help="append JSON results here")
p.add_argument("--graphbolt", action="store_true", help="DGL >= 2.1: sample with GraphBolt (partition.py --graphbolt)")
args = p.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed + (args.machine_id or 0))
np.random.seed(args.seed + (args.machine_id or 0))
import dgl  # noqa: E402
import dgl.nn as dglnn  # noqa: E402
import torch.distributed as tdist  # noqa: E402

dgl.utils.set_num_threads(args.threads)
rank = 0


def log(msg):
    print(f"[{info['kind']} r{rank} pid{os.getpid()} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


info_path = os.path.join(os.path.dirname(os.path.abspath(args.part_config)), "info.json")
if not os.path.exists(info_path):
    sys.exit(f"train.py: {info_path} not found: partition with partition.py")
info = json.load(open(info_path))
if args.graphbolt and not info.get("graphbolt"):
    sys.exit(f"train.py: --graphbolt, but {args.part_config} was not converted (partition.py --graphbolt)")
typed = info["kind"] == "typed"
target, featureless = info["target_type"], info["featureless"]


class SAGE(nn.Module):
    def __init__(self, in_dim, hidden, n_cls, num_layers, dropout):
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [n_cls]
        self.layers = nn.ModuleList(dglnn.SAGEConv(i, o, "mean") for i, o in zip(dims[:-1], dims[1:]))
        self.drop = nn.Dropout(dropout)

    def forward(self, blocks, h):
        last = len(self.layers) - 1
        for i, (layer, blk) in enumerate(zip(self.layers, blocks)):
            h = layer(blk, h)
            if i < last:
                h = self.drop(F.relu(h))
        return h


class RGCN(nn.Module):
    def __init__(self, in_dims, hidden, n_cls, canonical_etypes, num_layers, dropout):
        super().__init__()
        self.layers = nn.ModuleList()
        dims = dict(in_dims)
        for i in range(num_layers):
            out = n_cls if i == num_layers - 1 else hidden
            self.layers.append(dglnn.HeteroGraphConv(
                {rel: dglnn.SAGEConv((dims[s], dims[d]), out, "mean") for s, rel, d in canonical_etypes},
                aggregate="sum"))
            dims = dict.fromkeys(dims, out)
        self.drop = nn.Dropout(dropout)

    def forward(self, blocks, h):
        last = len(self.layers) - 1
        for i, (layer, blk) in enumerate(zip(self.layers, blocks)):
            # destinations only of the types the block has (the last block: the target type's),
            # so that HeteroGraphConv skips relations into types with no destinations, as
            # fastsample's R-GCN does (given a block alone, it would run them on 0 rows, and
            # SAGEConv would still project every source row where in > out)
            dst = {t: v[:blk.num_dst_nodes(t)] for t, v in h.items() if blk.num_dst_nodes(t) > 0}
            h = layer(blk, (h, dst))
            if i < last:
                h = {t: self.drop(F.relu(v)) for t, v in h.items()}
        return h[target]


t_setup = time.perf_counter()
fanouts = [int(f) for f in args.fanouts.split(",")]
sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)

assert os.environ.get("DGL_DIST_MODE") == "distributed"
if args.machine_id is not None:  # both 'machines' are 127.0.0.1: pin the machine id (see machine.sh)
    import dgl.distributed.rpc_client as _rc
    _mid = args.machine_id
    _rc.get_local_machine_id = lambda namebook: _mid
dgl.distributed.initialize(args.ip_config, **({"use_graphbolt": True} if args.graphbolt else {}))
from dgl.distributed import role as _role  # noqa: E402
rank = _role.get_trainer_rank()
assert args.machine_id is None or rank == args.machine_id, (rank, args.machine_id)
tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.torch_port}",
                         world_size=args.world_size, rank=rank)
torch.manual_seed(args.seed + rank)
g = dgl.distributed.DistGraph(info["graph_name"], part_config=args.part_config)
pb = g.get_partition_book()
if getattr(g, "_use_graphbolt", False) != args.graphbolt:  # what the servers answered (DGL >= 2.1 asks them)
    sys.exit(f"train.py: --graphbolt {args.graphbolt}, but the servers sample with GraphBolt: "
             f"{getattr(g, '_use_graphbolt', False)} (USE_GRAPHBOLT=1 for both)")
if typed:
    train_nid = dgl.distributed.node_split(g.nodes[target].data["train_mask"], pb, ntype=target, force_even=True)
    feat = {t: g.nodes[t].data["feat"] for t in g.ntypes if t not in featureless}
    label = g.nodes[target].data["label"]
else:
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    feat, label = g.ndata["feat"], g.ndata["label"]
log(f"partid={pb.partid} local train {target}={len(train_nid)} nodes={g.num_nodes()} edges={g.num_edges()} "
    f"etypes={g.canonical_etypes} graphbolt={args.graphbolt}")
loader = dgl.dataloading.DistNodeDataLoader(g, {target: train_nid} if typed else train_nid, sampler,
                                            batch_size=args.batch_size, shuffle=True, drop_last=False)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding_init import normal_init  # noqa: E402  (the servers unpickle it by module name)

emb = {t: dgl.distributed.DistEmbedding(g.num_nodes(t), args.embed_dim, name=f"emb_{t}", init_func=normal_init,
                                        part_policy=g.get_node_partition_policy(t)) for t in featureless}
if typed:
    in_dims = {t: (args.embed_dim if t in featureless else int(feat[t].shape[1])) for t in g.ntypes}
    model = RGCN(in_dims, args.hidden, info["num_classes"], g.canonical_etypes, len(fanouts), args.dropout)
else:
    in_dims = int(feat.shape[1])
    model = SAGE(in_dims, args.hidden, info["num_classes"], len(fanouts), args.dropout)
with torch.no_grad():  # same initial weights on every trainer (DDP would broadcast them)
    for prm in model.parameters():
        tdist.broadcast(prm, 0)
params = [q for q in model.parameters()]
opt = torch.optim.Adam(params, lr=args.lr)
sparse_opt = dgl.distributed.optim.SparseAdam(list(emb.values()), lr=args.embed_lr) if emb else None
n_params = sum(q.numel() for q in params)
setup_s = time.perf_counter() - t_setup
log(f"setup {setup_s:.1f}s, threads torch={torch.get_num_threads()}, dense params {n_params}, "
    f"featureless {featureless} (DistEmbedding {args.embed_dim}), in_dims {in_dims}")

results = []
for epoch in range(args.epochs):
    tdist.barrier()
    model.train()
    T = dict.fromkeys(["sample_s", "fetch_s", "compute_s", "allreduce_s", "optimizer_s", "embed_update_s"], 0.0)
    nb = n_in = n_e = 0
    loss_sum = 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    while True:
        if args.max_steps and nb >= args.max_steps:
            break
        a = time.perf_counter()
        try:
            input_nodes, seeds, blocks = next(it)
        except StopIteration:
            break
        b = time.perf_counter()
        if typed:
            x = {t: (emb[t](ids) if t in emb else feat[t][ids]) for t, ids in input_nodes.items()}
            y = label[seeds[target]].long()
        else:
            x, y = feat[input_nodes], label[seeds].long()
        c = time.perf_counter()
        opt.zero_grad()
        if sparse_opt is not None:
            # as DGL's examples do: without it, step() never resets the embeddings' traces, and
            # every step sends and applies the gradient rows of all earlier steps again
            sparse_opt.zero_grad()
        out = model(blocks, x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        d = time.perf_counter()
        grads = [q.grad if q.grad is not None else torch.zeros_like(q) for q in params]
        flat = torch._utils._flatten_dense_tensors(grads)
        tdist.all_reduce(flat)
        flat /= args.world_size
        for q, gq in zip(params, torch._utils._unflatten_dense_tensors(flat, grads)):
            if q.grad is None:
                q.grad = gq
            else:
                q.grad.copy_(gq)
        e = time.perf_counter()
        opt.step()
        f = time.perf_counter()
        if sparse_opt is not None:
            sparse_opt.step()
        h = time.perf_counter()
        T["sample_s"] += b - a; T["fetch_s"] += c - b; T["compute_s"] += d - c
        T["allreduce_s"] += e - d; T["optimizer_s"] += f - e; T["embed_update_s"] += h - f
        nb += 1
        n_in += sum(len(v) for v in input_nodes.values()) if typed else len(input_nodes)
        n_e += sum(blk.num_edges() for blk in blocks)
        loss_sum += loss.detach().item()
    epoch_s = time.perf_counter() - t0
    rec = {"system": "distdgl", "rank": rank, "epoch": epoch, "warmup": epoch == 0, "epoch_s": round(epoch_s, 3),
           **{k: round(v, 3) for k, v in T.items()}, "batches": nb, "avg_input_nodes": n_in // max(nb, 1),
           "avg_sampled_edges": n_e // max(nb, 1), "mean_loss": round(loss_sum / max(nb, 1), 4)}
    tt = torch.tensor([epoch_s])
    tdist.all_reduce(tt, op=tdist.ReduceOp.MAX)
    rec["epoch_s_max_over_trainers"] = round(float(tt), 3)
    results.append(rec)
    print("EPOCH " + json.dumps(rec), flush=True)

timed = [r for r in results if not r["warmup"]]
med = lambda k: float(np.median([r[k] for r in timed])) if timed else None  # noqa: E731
summary = {"system": "distdgl", "kind": info["kind"], "graphbolt": args.graphbolt, "rank": rank, "host": socket.gethostname(), "dgl": dgl.__version__,
           "torch": torch.__version__, "threads": args.threads, "batch_size": args.batch_size, "fanouts": fanouts,
           "hidden": args.hidden, "embed_dim": args.embed_dim, "lr": args.lr, "embed_lr": args.embed_lr,
           "dropout": args.dropout, "setup_s": round(setup_s, 1),
           "median_epoch_s": med("epoch_s_max_over_trainers"),
           **{f"median_{k}": med(k) for k in ["epoch_s", "sample_s", "fetch_s", "compute_s", "allreduce_s",
                                               "optimizer_s", "embed_update_s"]},
           "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
print("SUMMARY " + json.dumps(summary), flush=True)
if args.out:
    with open(args.out, "a") as fo:
        fo.write(json.dumps({"summary": summary, "epochs": results}) + "\n")
tdist.barrier()
tdist.destroy_process_group()
