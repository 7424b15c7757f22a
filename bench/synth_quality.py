"""Does a GNN beat an MLP on a dataset? A quick check of a dataset's graph signal.

Both models are the same 2-layer MLP trained full-batch on the training nodes with Adam:
  * mlp: on the node's own features x;
  * gnn: on [x, Ax, A^2 x], A the mean over in-neighbours: a 2-hop GraphSAGE-style model
    with the aggregation precomputed (SIGN / SGC style), so the check runs in seconds
    even on ogbn-products-sized graphs.
Prints test accuracy of each; --json PATH writes them.

    python bench/synth_quality.py data/products
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch

from fastsample.data.graph import load_dataset


def mean_aggregate(indptr: np.ndarray, indices: np.ndarray, x: torch.Tensor) -> torch.Tensor:
    deg = np.diff(indptr).astype(np.float32)
    weights = np.repeat(1.0 / np.maximum(deg, 1.0), deg.astype(np.int64)).astype(np.float32)
    adj = torch.sparse_csr_tensor(torch.from_numpy(np.asarray(indptr, dtype=np.int64)),
                                  torch.from_numpy(np.asarray(indices, dtype=np.int64)),
                                  torch.from_numpy(weights), size=(len(deg), len(deg)),
                                  check_invariants=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return adj @ x


def train_eval(x: torch.Tensor, y: torch.Tensor, train, test, classes: int,
               epochs: int, seed: int) -> float:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    xt, yt = x[train], y[train]
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
    with torch.no_grad():
        return float((model(x[test]).argmax(1) == y[test]).float().mean())


def compare(path, epochs: int = 200, seed: int = 0) -> dict:
    ds = load_dataset(path)
    t0 = time.perf_counter()
    x = torch.from_numpy(np.array(ds.features, dtype=np.float32))
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    ax = mean_aggregate(ds.graph.indptr, ds.graph.indices, x)
    aax = mean_aggregate(ds.graph.indptr, ds.graph.indices, ax)
    y = torch.from_numpy(np.array(ds.labels))
    train = torch.from_numpy(np.asarray(ds.train, dtype=np.int64))
    test = torch.from_numpy(np.asarray(ds.test, dtype=np.int64))
    mlp = train_eval(x, y, train, test, ds.num_classes, epochs, seed)
    gnn = train_eval(torch.cat([x, ax, aax], 1), y, train, test, ds.num_classes, epochs, seed)
    return {"dataset": ds.name, "nodes": ds.graph.num_nodes, "edges": ds.graph.num_edges,
            "train": len(train), "test": len(test), "epochs": epochs,
            "mlp_test_acc": round(mlp, 4), "gnn_test_acc": round(gnn, 4),
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset directory")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="write the result as JSON")
    args = p.parse_args()
    r = compare(args.dataset, args.epochs, args.seed)
    print(f"{r['dataset']}: {r['nodes']:,} nodes, {r['edges']:,} edges, train {r['train']:,}, "
          f"test {r['test']:,}, {torch.get_num_threads()} threads")
    print(f"MLP on x:                  test acc {r['mlp_test_acc']:.4f}")
    print(f"2-hop GNN on [x, Ax, AAx]: test acc {r['gnn_test_acc']:.4f}   ({r['seconds']} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)


if __name__ == "__main__":
    main()
