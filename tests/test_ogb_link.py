"""OGB's link layout (ogbl-*) converts into a link-split dataset that trains with --task
link; its split files are read without running code; bad ones are one clear error."""

import gzip

import numpy as np
import pytest
import torch

from conftest import run_module
from fastsample.data.edge_splits import load_edge_split
from fastsample.data.graph import load_dataset
from helpers import train_records

N, K = 300, 10


def write_csv(path, rows):
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(str(v) for v in np.atleast_1d(r)) + "\n" for r in rows))


def make_ogbl(root, rng, held_out_in_graph=False, shared_negatives=False):
    """A citation2-shaped directory: a directed graph, held-out edges with K negatives each."""
    raw, split = root / "raw", root / "split" / "time"
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    blocks = rng.integers(0, 3, N)
    src, dst = rng.integers(0, N, 3000), rng.integers(0, N, 3000)
    keep = (src != dst) & (blocks[src] == blocks[dst])  # edges inside a block: predictable from the features
    pairs = np.unique(np.stack([src[keep], dst[keep]], 1), axis=0)
    pairs = pairs[rng.permutation(len(pairs))]
    held, train = pairs[:120], pairs[120:]
    write_csv(raw / "edge.csv.gz", train if not held_out_in_graph else pairs)
    write_csv(raw / "num-node-list.csv.gz", [N])
    feats = np.eye(3)[blocks] + 0.3 * rng.standard_normal((N, 3))
    write_csv(raw / "node-feat.csv.gz", np.round(feats, 4))
    torch.save({"source_node": torch.from_numpy(train[:, 0]), "target_node": torch.from_numpy(train[:, 1])},
               split / "train.pt")
    for name, part in (("valid", held[:60]), ("test", held[60:])):
        state = {"source_node": torch.from_numpy(part[:, 0]), "target_node": torch.from_numpy(part[:, 1]),
                 "target_node_neg": torch.from_numpy(rng.integers(0, N, (len(part), K)))}
        if shared_negatives:
            state = {"edge": torch.from_numpy(part), "edge_neg": torch.from_numpy(rng.integers(0, N, (50, 2)))}
        torch.save(state, split / f"{name}.pt")
    return root


def test_a_citation2_shaped_directory_converts_and_trains(tmp_path):
    root = make_ogbl(tmp_path / "ogbl-tiny", np.random.default_rng(0))
    proc = run_module("fastsample.data", "ogb", root, tmp_path / "d", "--directed")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(tmp_path / "d")
    split = load_edge_split(tmp_path / "d", ds.num_nodes, ds.meta["link"], graph=ds.graph)
    assert not split.undirected and split.val_neg.shape == (60, K) and len(split.test) == 60
    assert np.array_equal(np.sort(ds.graph.indices), np.sort(split.train[:, 0].astype(ds.graph.indices.dtype)))
    assert run_module("fastsample.partition", tmp_path / "d", tmp_path / "p", "--parts", "2").returncode == 0
    records = train_records(tmp_path / "p", 2, tmp_path / "log.jsonl", "--task", "link", "--scorer", "dot", "--fanouts", "5,5",
                            "--batch-size", "128", "--hidden", "16", "--epochs", "3", "--threads", "1", "--quiet")
    assert max(r["val_auc"] for r in records) > 0.6


@pytest.mark.parametrize("case", ["shared negatives", "held out in graph", "code in a split file", "negatives shape"])
def test_bad_link_layouts_are_one_clear_error(tmp_path, case):
    rng = np.random.default_rng(1)
    root = make_ogbl(tmp_path / "o", rng, held_out_in_graph=case == "held out in graph",
                     shared_negatives=case == "shared negatives")
    if case == "code in a split file":
        torch.save({"source_node": torch.zeros(3, dtype=torch.int64), "hook": np.random.default_rng},
                   root / "split" / "time" / "valid.pt")
    if case == "negatives shape":
        state = torch.load(root / "split" / "time" / "test.pt")
        state["target_node_neg"] = state["target_node_neg"][:-1]
        torch.save(state, root / "split" / "time" / "test.pt")
    message = {"shared negatives": "valid.pt: edge_neg is one shared set of negative edges",
               "held out in graph": "held-out edges are also in",
               "code in a split file": "valid.pt: not a plain torch file of tensors",
               "negatives shape": "test.pt: target_node_neg has shape (59, 10), expected (60, K)"}[case]
    proc = run_module("fastsample.data", "ogb", root, tmp_path / "out", "--directed")
    assert proc.returncode != 0 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "out").exists()
