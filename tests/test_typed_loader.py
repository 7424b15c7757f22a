"""NodeLoader on typed data: per-type input features, the target type's labels, and typed
blocks whose per-relation edge lists are exactly the sampled typed edges; the same batches
in hybrid and vanilla mode."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from fastsample.partition import partition_dataset
from helpers import REPO, assert_checks, mpiexec
from fastsample.trainer.runlog import read_records

FANOUTS = [{"cites": 3, "rev_cites": 2, "*": 2}, 4]


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed-loader")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    partition_dataset(root / "h", root / "p2", 2, progress=False)
    return root


ARGS = ["--fanouts", "4,3", "--batch-size", "64", "--hidden", "16", "--threads", "1", "--quiet"]
RELATIONS = ["--relation-fanouts", "cites=2,written_by=0;rev_cites=-1"]
PYG_RGAT = ["--model", str(REPO / "examples" / "pyg_rgat.py") + ":build"]


def trainer_runs(ck) -> dict:
    """The python -m fastsample.train runs the trainer tests below compare, {(test, run):
    arguments}; ``ck``: the checkpoint directory the resume test continues from."""
    from helpers import native_built

    runs = {("modes", (mode, kernel)): [*ARGS, "--epochs", "2", "--mode", mode, "--sampler", kernel]
            for mode in ("hybrid", "vanilla") for kernel in ["numba"] + (["native"] if native_built() else [])}
    # with prefetch the embedding rows come at the step, never from before an update
    runs["modes", "prefetch"] = [*ARGS, "--epochs", "2", "--prefetch", "1"]
    runs["modes", "first"] = [*ARGS, "--epochs", "1", "--checkpoint-dir", ck]  # the first half of the resumed run
    for mode in ("hybrid", "vanilla"):
        runs["eval", mode] = [*ARGS, "--epochs", "2", "--eval", "full", "--eval-batch-size", "300", "--mode", mode]
    for name, more in {"plain": [], "cached": ["--cache-fraction", "0.2"],
                       "vanilla": ["--cache-fraction", "0.2", "--cache-policy", "degree", "--mode", "vanilla"],
                       "bf16": ["--precision", "bf16"],
                       "bf16c": ["--precision", "bf16", "--cache-fraction", "0.2", "--prefetch", "1"],
                       "int8": ["--precision", "int8"],
                       "int8c": ["--precision", "int8", "--cache-fraction", "0.2", "--prefetch", "1", "--mode",
                                 "vanilla"]}.items():
        runs["cache", name] = [*ARGS, "--epochs", "1", *more]
    for mode, prefetch in (("hybrid", 0), ("vanilla", 0), ("hybrid", 1)):
        runs["relations", (mode, prefetch)] = [*ARGS, *RELATIONS, "--epochs", "1", "--mode", mode, "--prefetch",
                                               str(prefetch)]
    runs["relations", "plain"] = [*ARGS, "--epochs", "1"]
    if importlib.util.find_spec("torch_geometric") is not None:
        for mode in ("hybrid", "vanilla"):
            runs["pyg_rgat", mode] = [*PYG_RGAT, *ARGS, "--epochs", "2", "--mode", mode]
    return runs


@pytest.fixture(scope="module")
def trained(typed, tmp_path_factory) -> tuple[dict, Path]:
    """Every trainer_runs run on typed/p2 in one launch (helpers.train_many: the command's
    main() per run): ({(test, run): its epoch records}, the checkpoint directory of
    ("modes", "first")); the resume starts a launch of its own."""
    from helpers import train_many

    root = tmp_path_factory.mktemp("typed-trained")
    runs = trainer_runs(root / "ck")
    return train_many(typed / "p2", 2, {key: (root / f"{i}.jsonl", args) for i, (key, args) in enumerate(runs.items())},
                      timeout=900), root / "ck"


def runs_of(trained, test: str) -> dict:
    """`trained`'s runs of one test: {run: its epoch records}."""
    return {name: records for (of, name), records in trained[0].items() if of == test}


def check_batch(batch, ds, orig=None):
    """Every input row is the dataset's row of that node; labels are the seeds'; each
    relation's edge list is exactly the MFG's edges of that type. ``orig``: new -> dataset id."""
    g = ds.graph
    ids = (lambda v: v) if orig is None else (lambda v: orig[v])
    m0 = batch.mfgs[0]
    types = g.node_type_of(ids(m0.src_ids))
    for t, name in enumerate(g.node_types):
        mine = ids(m0.src_ids[types == t])
        if ds.features[name] is None:
            assert batch.x[name] is None
        else:
            assert torch.equal(batch.x[name], torch.from_numpy(ds.features[name][mine - g.node_type_offset[t]]))
    target = g.node_types.index(ds.target_type)
    assert torch.equal(batch.y, torch.from_numpy(ds.labels[ids(batch.seeds.numpy()) - g.node_type_offset[target]]))
    for mfg, block in zip(batch.mfgs, batch.blocks):
        src_types = g.node_type_of(ids(mfg.src_ids))
        by_type = {t: mfg.src_ids[src_types == t] for t in range(len(g.node_types))}
        want, got = set(), set()
        dst = np.repeat(np.arange(mfg.num_dst), np.diff(mfg.indptr))
        for e in range(mfg.num_edges):
            want.add((int(mfg.src_ids[mfg.indices[e]]), int(mfg.src_ids[dst[e]]), int(mfg.edge_types[e])))
        for r, (s, _, d) in enumerate(g.edge_types):
            ei = block.edge_index_dict[g.edge_types[r]].numpy()
            si, di = g.node_types.index(s), g.node_types.index(d)
            assert block.relation_size(r) == (block.num_src_dict[s], block.num_dst_dict[d])
            got |= {(int(by_type[si][a]), int(by_type[di][b]), r) for a, b in ei.T}
        assert got == want
        assert block.num_dst_dict[ds.target_type] >= 0 and sum(block.num_dst_dict.values()) == mfg.num_dst


def test_one_process_on_a_typed_dataset(typed):
    ds = load_dataset(typed / "h")
    loader = NodeLoader(typed / "h", FANOUTS, 64, seed=3)
    assert len(loader) == -(-len(ds.train) // 64)
    for step, batch in enumerate(loader):
        check_batch(batch, ds)
        if step == 2:
            break


def test_a_pyg_heteroconv_consumes_a_typed_batch(typed):
    pyg = pytest.importorskip("torch_geometric", reason="the pyg extra is not installed")
    from torch_geometric.nn import HeteroConv, SAGEConv

    ds = load_dataset(typed / "h")
    batch = next(iter(NodeLoader(typed / "h", FANOUTS, 32, seed=1)))
    x = {t: (v if v is not None else torch.zeros(batch.blocks[0].num_src_dict[t], 16)) for t, v in batch.x.items()}
    convs = [HeteroConv({et: SAGEConv((-1, -1), 8) for et in ds.graph.edge_types}, aggr="sum") for _ in range(2)]
    h = x
    for conv, block in zip(convs, batch.blocks):
        h = conv(h, block.edge_index_dict)
        h = {t: v[:block.num_dst_dict[t]] for t, v in h.items()}  # this layer's destinations
    assert h["paper"].shape == (len(batch), 8) and pyg is not None


@pytest.mark.mpi
def test_hybrid_and_vanilla_give_the_same_typed_batches_on_two_ranks(typed):
    proc = mpiexec(2, REPO / "tests" / "typed_loader_worker.py", typed / "h", typed / "p2")
    assert_checks(proc, 2, [f"step{s}" for s in range(3)])


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["hybrid", "vanilla"])
def test_sharded_embeddings_gather_current_rows_and_return_gradients_to_their_owners(typed, mode):
    proc = mpiexec(2, REPO / "tests" / "embedding_worker.py", typed / "p2", mode)
    assert_checks(proc, 2, [f"{c}{s}" for s in range(4) for c in ("send_back", "step")])


@pytest.mark.mpi
@pytest.mark.slow
def test_the_trainer_trains_typed_data_alike_in_every_mode_and_kernel_and_resumes(typed, trained, tmp_path):
    # the built-in R-GCN with sharded learnable embeddings for the featureless type: the
    # same per-step losses in hybrid and vanilla mode with either kernel and with prefetch;
    # each rank checkpoints its shard, and --resume continues with exactly the
    # uninterrupted run's losses. The runs: trainer_runs' ("modes", ...), made by `trained`
    from conftest import train_records

    runs, ck = runs_of(trained, "modes"), trained[1]
    runs.pop("first")
    base = [r["step_losses"] for r in runs[("hybrid", "numba")]]
    assert all([r["step_losses"] for r in got] == base for got in runs.values())
    assert runs[("hybrid", "numba")][-1]["val_acc"] > 0.5  # it learns (4 classes)
    assert sorted(f.name for f in ck.iterdir()) == ["epoch-0.embed-0-of-2.pt", "epoch-0.embed-1-of-2.pt", "epoch-0.pt"]
    resumed = train_records(typed / "p2", 2, tmp_path / "resumed.jsonl", *ARGS, "--epochs", "2", "--checkpoint-dir", ck,
                            "--resume")
    assert [r["step_losses"] for r in resumed] == base[1:]


@pytest.mark.mpi
@pytest.mark.slow
def test_the_pyg_rgat_example_trains_typed_data_alike_in_both_modes(trained):
    pytest.importorskip("torch_geometric", reason="the pyg extra is not installed")
    runs = list(runs_of(trained, "pyg_rgat").values())  # hybrid, vanilla
    assert [r["step_losses"] for r in runs[0]] == [r["step_losses"] for r in runs[1]]
    assert runs[0][-1]["loss"] < runs[0][0]["step_losses"][0]  # it learns


def test_layerwise_inference_on_typed_data_is_the_full_neighbour_forward(typed):
    # every target node's output from layer-wise inference equals the R-GCN's forward on
    # its full-neighbour blocks (fanout -1 on every relation), embeddings included
    from fastsample.distributed.embedding import ShardedEmbeddings
    from fastsample.loading.layerwise import layerwise
    from fastsample.nn.rgcn import RGCN

    ds = load_dataset(typed / "h")
    g = ds.graph
    runs = g.node_type_offset
    emb = ShardedEmbeddings(runs, 0, 1, g.node_types, ["institute"], dim=8, lr=0.1, seed=1)
    torch.manual_seed(0)
    dims = {t: 8 if f is None else f.shape[1] for t, f in ds.features.items()}
    model = RGCN(dims, 16, ds.num_classes, 2, g.edge_types, ds.target_type)
    out = layerwise(model, typed / "h", batch_size=300, inputs=emb.shards())
    lo = g.node_type_offset[g.node_types.index(ds.target_type)]
    assert out.shape == (len(ds.labels), ds.num_classes)
    model.eval()
    loader = NodeLoader(typed / "h", [-1, -1], 100, split="test", embeddings=emb)
    with torch.no_grad():
        for batch in loader:
            want = model(batch.blocks, batch.x).numpy()
            np.testing.assert_allclose(out[batch.seeds.numpy() - lo], want, rtol=1e-5, atol=1e-5)


@pytest.mark.mpi
def test_eval_full_on_typed_data_agrees_in_both_modes(trained):
    runs = list(runs_of(trained, "eval").values())  # hybrid, vanilla
    assert [(r["val_acc"], r["test_acc"]) for r in runs[0]] == [(r["val_acc"], r["test_acc"]) for r in runs[1]]
    assert runs[0][-1]["val_acc"] > 0.8


@pytest.mark.mpi
def test_the_feature_cache_bf16_and_int8_take_typed_data(trained):
    # a cache changes the bytes sent, never the losses, in either mode; bf16 sends fewer
    # bytes again, and with a cache and prefetch still gives bf16's own losses; int8 fewer
    # again (its features' rows a quarter of fp32's; the embedding rows stay fp32), its own
    # losses the same in vanilla mode with a cache and prefetch (there decoded before the model)
    runs = runs_of(trained, "cache")
    plain, cached, vanilla, half, half_cached, q, q_cached = (
        runs[name][0] for name in ("plain", "cached", "vanilla", "bf16", "bf16c", "int8", "int8c"))
    assert plain["step_losses"] == cached["step_losses"] == vanilla["step_losses"]
    assert cached["cache_hit_rate"] > 0.3 and cached["bytes_sent"] < plain["bytes_sent"] / 2
    assert half["bytes_sent"] < 0.7 * plain["bytes_sent"] and half["step_losses"] != plain["step_losses"]
    assert half["step_losses"] == half_cached["step_losses"]
    assert abs(half["loss"] - plain["loss"]) < 0.05
    assert q["bytes_sent"] < 0.8 * half["bytes_sent"] and q["step_losses"] not in (plain["step_losses"],
                                                                                   half["step_losses"])
    assert q["step_losses"] == q_cached["step_losses"]
    assert abs(q["loss"] - plain["loss"]) < 0.05


@pytest.mark.mpi
def test_per_relation_fanouts_from_the_command_line(typed, trained):
    from conftest import run_module

    got = runs_of(trained, "relations")  # hybrid, vanilla, hybrid with prefetch; plain: without RELATIONS
    plain = got.pop("plain")
    runs = list(got.values())
    assert runs[0][0]["step_losses"] == runs[1][0]["step_losses"] == runs[2][0]["step_losses"]
    assert plain[0]["step_losses"] != runs[0][0]["step_losses"]  # the mapping took effect
    for spec, message in (("cited=2;", "--relation-fanouts: layer 0: relation 'cited' is not an edge type"),
                          ("cites=2", "--relation-fanouts has 1 layers, --fanouts 2")):
        proc = run_module("fastsample.train", "--data", typed / "h", "--fanouts", "4,3", "--relation-fanouts", spec)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.mpi
def test_infer_writes_the_target_types_outputs_the_full_evaluation_saw(typed, tmp_path):
    # typed data: the R-GCN's outputs for the target type only, the featureless type's
    # rows from the embedding shards saved beside the checkpoint
    from helpers import run_commands

    log, ck, out = tmp_path / "log.jsonl", tmp_path / "ck", tmp_path / "out"
    # the training and the inference in one launch (helpers.run_commands: each its own exit status and output)
    trained, proc = run_commands(2, [
        ("fastsample.train", ["--data", typed / "p2", "--fanouts", "4,3", "--batch-size", "64", "--hidden", "16",
                              "--epochs", "1", "--threads", "1", "--eval", "full", "--eval-batch-size", "300",
                              "--checkpoint-dir", ck, "--log-json", log, "--quiet"]),
        ("fastsample.infer", ["--data", typed / "p2", "--checkpoint", ck / "epoch-0.pt", "--out", out, "--batch-size",
                              "300", "--quiet"])], tmp_path / "runs", timeout=300)
    assert trained.returncode == 0, trained.stderr
    assert len(list(ck.glob("epoch-0.embed-*-of-2.pt"))) == 2  # the featureless type's table
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(typed / "h")
    lo = ds.graph.node_type_offset[ds.graph.node_types.index(ds.target_type)]
    index = json.loads((out / "index.json").read_text())
    assert index["node_type"] == ds.target_type and index["width"] == ds.num_classes
    assert index["model"] == "sage" and index["architecture"] == "RGCN"  # what --model sage built on typed data
    assert proc.stdout == f"python -m fastsample.infer: {len(ds.labels):,} paper nodes x {ds.num_classes} (logits) " \
                          f"written to {out} by 2 ranks in " + proc.stdout.split(" ranks in ")[1]
    h = np.concatenate([np.load(out / f) for f in index["files"]])
    ids = np.concatenate([np.arange(a, b) for a, b in index["ranges"]])
    assert h.shape == (len(ds.labels), ds.num_classes) and len(ids) == len(h)
    pred = np.full(len(ds.labels), -1)
    pred[np.load(out / "orig_ids.npy")[ids] - lo] = h.argmax(1)
    test = np.asarray(ds.test) - lo
    assert (pred >= 0).all() and float((pred[test] == ds.labels[test]).mean()) == read_records(log)[-1]["test_acc"]


def test_a_fresh_rgcn_starts_near_chance(typed):
    # a destination sums a term per relation into its type; unscaled, those sums start the
    # loss far above ln(classes) (issue 37: 14.8 against ln 16 = 2.8 on a real typed network)
    from fastsample.distributed.embedding import ShardedEmbeddings
    from fastsample.nn.rgcn import RGCN

    ds = load_dataset(typed / "h")
    g = ds.graph
    emb = ShardedEmbeddings(g.node_type_offset, 0, 1, g.node_types, ["institute"], dim=64, lr=0.1, seed=1)
    dims = {t: 64 if f is None else f.shape[1] for t, f in ds.features.items()}
    into_target = sum(e[2] == ds.target_type for e in g.edge_types)
    assert into_target >= 3, g.edge_types  # the case the scaling is for
    losses = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = RGCN(dims, 256, ds.num_classes, 3, g.edge_types, ds.target_type).eval()
        batch = next(iter(NodeLoader(typed / "h", [10, 10, 10], 256, split="train", embeddings=emb, seed=seed)))
        with torch.no_grad():
            losses.append(float(torch.nn.functional.cross_entropy(model(batch.blocks, batch.x), batch.y)))
    assert np.mean(losses) < 1.15 * np.log(ds.num_classes), (losses, np.log(ds.num_classes))
