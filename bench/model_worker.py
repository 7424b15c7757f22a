"""Times one GraphSAGE implementation on the mini-batches bench/model.py gives it.

Runs under the dev Python (impl fastsample, reference) or a Python with DGL (impl dgl113),
so it imports fastsample or DGL only for the impl asked for. Reads a job JSON; prints
one JSON record: per-iteration times of forward + backward and of the optimizer step,
and the losses (all impls must agree: same blocks, same weights).

  fastsample   fastsample.nn.sage.GraphSAGE, native aggregation, fp32 products on torch's BLAS
               (the training default before the engines were measured: --matmul blas)
  fastsample-auto   the same, the products' engines measured and chosen (--matmul auto)
  fastsample-bf16   --precision bf16 as the trainer runs it: bfloat16 input features, and bf16
               products only where the measurement says they pay
  fastsample-bf16-products   bfloat16 features and bf16 products, whether they pay or not
  reference    the same model on plain PyTorch (sparse CSR mean), the tests' reference
  dgl113       dgl.nn.SAGEConv('mean') per layer, DGL 1.1.3, on the same blocks
"""

import json
import sys
import time

import numpy as np
import torch


def load_batches(path):
    z = np.load(path)
    batches = []
    for b in range(int(z["num_batches"])):
        layers = [(z[f"indptr{b}_{i}"], z[f"indices{b}_{i}"], int(z[f"num_src{b}_{i}"]), int(z[f"num_dst{b}_{i}"]))
                  for i in range(int(z["num_layers"]))]
        batches.append((layers, torch.from_numpy(z[f"x{b}"]), torch.from_numpy(z[f"y{b}"])))
    return batches


def fastsample_model(job, batches, aggregation):
    from fastsample.nn import matmul
    from fastsample.nn.block import Block
    from fastsample.nn.sage import GraphSAGE
    from fastsample.sampling import set_num_threads

    set_num_threads(job["threads"])
    impl = job["impl"]
    rows = max(layers[0][3] for layers, _, _ in batches)  # the input layer's destinations
    shape = (min(rows, 4096), 2 * job["in_dim"], job["hidden"])
    if impl == "fastsample-auto":
        matmul.use(matmul.choose("auto", "fp32", shape))
    elif impl == "fastsample-bf16":
        matmul.use(matmul.choose("auto", "bf16", shape))
    elif impl == "fastsample-bf16-products":
        matmul.use(matmul.Plan(bf16=True, precision="bf16"))
    job["plan"] = matmul.current().describe()
    if "bf16" in impl:
        batches = [(layers, x.to(torch.bfloat16), y) for layers, x, y in batches]
    model = GraphSAGE(job["in_dim"], job["hidden"], job["classes"], job["layers"], dropout=0.0,
                      aggregation=aggregation)
    model.load_state_dict(torch.load(job["weights"]))
    inputs = [([Block(ip.astype(np.int64), ix.astype(np.int32), nd, ns) for ip, ix, ns, nd in layers], x, y)
              for layers, x, y in batches]
    return model, (lambda blocks, x: model(blocks, x)), inputs


def dgl_model(job, batches):
    from dgl_import import import_dgl

    dgl = import_dgl()
    from dgl.nn import SAGEConv

    dims = [job["in_dim"]] + [job["hidden"]] * (job["layers"] - 1) + [job["classes"]]
    layers = torch.nn.ModuleList(SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:]))
    w = torch.load(job["weights"])
    with torch.no_grad():  # fastsample's names: self_lin (weight, bias), neigh_lin (weight)
        for i, conv in enumerate(layers):
            conv.fc_self.weight.copy_(w[f"layers.{i}.self_lin.weight"])
            conv.fc_neigh.weight.copy_(w[f"layers.{i}.neigh_lin.weight"])
            if getattr(conv, "bias", None) is not None:  # DGL 1.x: one bias on the layer
                conv.bias.copy_(w[f"layers.{i}.self_lin.bias"])
                if conv.fc_self.bias is not None:
                    conv.fc_self.bias.zero_()
            else:
                conv.fc_self.bias.copy_(w[f"layers.{i}.self_lin.bias"])

    def forward(blocks, x):
        h = x
        for i, (conv, block) in enumerate(zip(layers, blocks)):
            h = conv(block, h)
            if i < len(layers) - 1:
                h = torch.relu(h)
        return h

    inputs = []
    for mfgs, x, y in batches:
        blocks = [dgl.create_block(("csc", (torch.from_numpy(ip.astype(np.int64)), torch.from_numpy(ix.astype(np.int64)),
                                            torch.tensor([], dtype=torch.int64))),
                                   num_src_nodes=ns, num_dst_nodes=nd) for ip, ix, ns, nd in mfgs]
        inputs.append((blocks, x, y))
    return layers, forward, inputs


def main() -> None:
    job = json.load(open(sys.argv[1]))
    torch.set_num_threads(job["threads"])
    batches = load_batches(job["batches"])
    if job["impl"] == "dgl113":
        model, forward, inputs = dgl_model(job, batches)
    else:
        model, forward, inputs = fastsample_model(job, batches, "torch" if job["impl"] == "reference" else "native")
    opt = torch.optim.Adam(model.parameters(), lr=job["lr"])
    fwd_bwd, step, losses = [], [], []
    for it in range(job["warmup"] + job["iterations"]):
        blocks, x, y = inputs[it % len(inputs)]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(forward(blocks, x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        losses.append(loss.item())
        if it >= job["warmup"]:
            fwd_bwd.append(t1 - t0)
            step.append(t2 - t1)
    print(json.dumps({"impl": job["impl"], "threads": job["threads"], "fwd_bwd_s": fwd_bwd, "step_s": step,
                      "losses": losses, "torch": torch.__version__, "plan": job.get("plan"),
                      "dgl": sys.modules["dgl"].__version__ if "dgl" in sys.modules else None}))


if __name__ == "__main__":
    main()
