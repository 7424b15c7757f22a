"""Exact layer-wise inference equals a single-process full-graph forward, on 1, 2 and 3 ranks."""

import json
import re
import warnings

import numpy as np
import pytest
import torch

from helpers import REPO, assert_checks, mpiexec, run_commands, run_many, run_module, train_many
from fastsample.nn.block import Block
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.graph import load_dataset
from fastsample.loading.layerwise import layerwise
from fastsample.partition import partition_dataset
from inference_worker import DIMS, make_model
from fastsample.trainer.runlog import read_records


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("inference")
    write_synthetic(root / "g", SynthConfig(num_nodes=700, avg_degree=6, num_classes=DIMS["classes"],
                                            feature_dim=DIMS["in_dim"], seed=4), progress=False)
    for p in (1, 2, 3):
        partition_dataset(root / "g", root / f"p{p}", p, mode="hybrid", progress=False)
    return root


def layerwise_on_ranks(ranks: int, jobs: list[dict]) -> None:
    """tests/inference_worker.py's jobs (part, kind, state, out; batch 64, hybrid unless a
    job says) in one launch on ``ranks`` ranks; each rank of each job saved its outputs."""
    jobs = [{"batch": 64, "mode": "hybrid", **{k: str(v) for k, v in job.items()}} for job in jobs]
    proc = mpiexec(ranks, REPO / "tests" / "inference_worker.py", json.dumps(jobs), timeout=300)
    assert_checks(proc, ranks, [f"layerwise_saved.{i}" for i in range(len(jobs))])


KINDS = ["sage", "pyg_sage"]


@pytest.fixture(scope="module")
def layerwise_shards(root, tmp_path_factory) -> dict:
    """Each of KINDS (pyg_sage where PyG is installed) with seed-0 weights, and its layer-wise
    outputs on 2 and 3 ranks: every kind's in one launch per rank count.
    {kind: (model, {ranks: [each rank's outputs]})}."""
    out = tmp_path_factory.mktemp("layerwise")
    kinds = ["sage"]
    with warnings.catch_warnings():  # imported as pytest.importorskip would: PyG's deprecation warnings are not ours
        warnings.simplefilter("ignore")
        try:
            import torch_geometric  # noqa: F401

            kinds.append("pyg_sage")
        except ImportError:
            pass
    models = {}
    for kind in kinds:
        torch.manual_seed(0)
        models[kind] = make_model(kind)
        torch.save(models[kind].state_dict(), out / f"{kind}.pt")
    shards = {kind: {} for kind in kinds}
    for p in (2, 3):
        layerwise_on_ranks(p, [{"part": root / f"p{p}", "kind": kind, "state": out / f"{kind}.pt",
                                "out": out / f"{kind}-p{p}"} for kind in kinds])
        for kind in kinds:
            shards[kind][p] = [np.load(out / f"{kind}-p{p}-{r}.npy") for r in range(p)]
    return {kind: (models[kind], shards[kind]) for kind in kinds}


def full_graph_forward(model, ds) -> np.ndarray:
    """One block per layer holding every node and every edge: the reference."""
    n = ds.graph.num_nodes
    block = Block(np.asarray(ds.graph.indptr, np.int64), np.asarray(ds.graph.indices, np.int32), n, n)
    model.eval()
    with torch.no_grad():
        return model([block] * model.num_layers, torch.from_numpy(np.array(ds.features, np.float32))).numpy()


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_layerwise_equals_a_full_graph_forward(root, layerwise_shards, kind):
    if kind == "pyg_sage":
        pytest.importorskip("torch_geometric", reason="the pyg extra is not installed")
    ds = load_dataset(root / "g")
    model, on_ranks = layerwise_shards[kind]  # seed-0 weights; its outputs on 2 and 3 ranks
    want = full_graph_forward(model, ds)
    assert np.abs(want).max() > 0.1  # a model that outputs something
    # one process, from the dataset directory itself (ids are the dataset's)
    assert np.allclose(layerwise(model, root / "g", batch_size=64), want, rtol=1e-5, atol=1e-5)
    for p in (1, 2, 3):
        shards = [layerwise(model, root / "p1", batch_size=64)] if p == 1 else on_ranks[p]
        got = np.empty_like(want)
        got[np.load(root / f"p{p}" / "orig_ids.npy")] = np.concatenate(shards)  # new id -> dataset id
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), f"P={p}: max error {np.abs(got - want).max()}"


def test_layerwise_reads_int8_features_as_their_decoded_values(root):
    # --precision int8 --eval full: the trainer's shard holds the features in 8 bits; the
    # layer-wise pass gathers them with their column scales and reads them decoded, so its
    # outputs are bitwise those over the decoded matrix (before, it refused the int8 shard)
    import dataclasses

    from fastsample import int8
    from fastsample.comm.local import LocalCommunicator
    from fastsample.data.graph import NODE
    from fastsample.loading.loader import open_data

    comm = LocalCommunicator()
    part = open_data(root / "p1", comm, "hybrid", "int8")
    assert part.features.dtype == int8.DTYPE
    decoded = dataclasses.replace(part, features=int8.decode(part.features, part.scales[NODE]), scales={})
    torch.manual_seed(0)
    model = make_model("sage")
    got = layerwise(model, part, comm, batch_size=64)
    assert np.abs(got).max() > 0.1
    assert np.array_equal(got, layerwise(model, decoded, comm, batch_size=64))


@pytest.mark.mpi
@pytest.mark.parametrize("precision, pinned", [("int8", ()), ("bf16", ("--matmul", "blas"))])
def test_infer_computes_as_the_checkpoints_run(root, tmp_path, precision, pinned):
    # a model is inferred as its run computed (the trainer's full evaluation): over the
    # features at its --precision (int8: a quarter of fp32's memory) and on its products'
    # engines (bf16 products: --matmul blas with bf16 pins them on any CPU); infer's rows are
    # bitwise the layer-wise pass so computed, not the one over fp32 features and products
    from fastsample.comm.local import LocalCommunicator
    from fastsample.loading.loader import open_data
    from fastsample.nn import matmul
    from fastsample.options import from_dict
    from fastsample.trainer import TrainConfig, load_checkpoint
    from fastsample.trainer.trainer import model_for

    ck, out = tmp_path / "ck", tmp_path / "out"
    trained = run_module("fastsample.train", "--data", root / "p1", "--fanouts", "4,4", "--hidden", "16",
                         "--batch-size", "64", "--epochs", "1", "--threads", "1", "--precision", precision, *pinned,
                         "--eval-every", "0", "--checkpoint-dir", ck, "--quiet")
    assert trained.returncode == 0, trained.stderr
    proc = run_module("fastsample.infer", "--data", root / "p1", "--checkpoint", ck / "epoch-0.pt", "--out", out,
                      "--quiet")
    assert proc.returncode == 0, proc.stderr
    got = np.load(out / "part-0.npy")
    state = load_checkpoint(ck / "epoch-0.pt", "cpu")
    assert state["products"]["bf16"] == bool(pinned)
    comm = LocalCommunicator()
    model = model_for(from_dict(TrainConfig, state["config"]), open_data(root / "p1", comm))
    model.load_state_dict(state["model"])
    before = matmul.use(matmul.from_saved(state["products"]))
    try:
        assert np.array_equal(got, layerwise(model, open_data(root / "p1", comm, "hybrid", precision), comm))
    finally:
        matmul.use(before)
    assert not np.array_equal(got, layerwise(model, open_data(root / "p1", comm), comm))


def test_infer_takes_a_dataset_directory_for_one_process_as_train_does(root, tmp_path):
    # trained on the dataset directory itself (one process), inferred there too: the rows,
    # keyed by the dataset's ids, are those inferred on its one-part partition
    ck = tmp_path / "ck"
    trained = run_module("fastsample.train", "--data", root / "g", "--fanouts", "4,4", "--hidden", "16",
                         "--batch-size", "64", "--epochs", "1", "--threads", "1", "--eval-every", "0",
                         "--checkpoint-dir", ck, "--quiet")
    assert trained.returncode == 0, trained.stderr
    rows = {}
    for data in ("g", "p1"):
        proc = run_module("fastsample.infer", "--data", root / data, "--checkpoint", ck / "epoch-0.pt",
                          "--out", tmp_path / data, "--threads", "1", "--quiet")
        assert proc.returncode == 0, proc.stderr
        h, orig = np.load(tmp_path / data / "part-0.npy"), np.load(tmp_path / data / "orig_ids.npy")
        rows[data] = h[np.argsort(orig)]  # in the dataset's order
    assert np.allclose(rows["g"], rows["p1"], rtol=1e-5, atol=1e-6)
    # another graph's data (other feature widths): one line saying so, not torch's list of keys
    write_synthetic(tmp_path / "other", SynthConfig(num_nodes=300, avg_degree=4, num_classes=4, feature_dim=5),
                    progress=False)
    proc = run_module("fastsample.infer", "--data", tmp_path / "other", "--checkpoint", ck / "epoch-0.pt",
                      "--out", tmp_path / "o", "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "its model (sage, trained on " in proc.stderr \
        and "does not fit" in proc.stderr, proc.stderr


def test_other_data_is_inferred_only_when_asked_and_a_relative_model_file_is_found_where_it_trained(root, tmp_path):
    # a checkpoint fits any graph of the same widths: infer applied it to other data without a
    # word; and a --model FILE.py given relative to where training ran was looked up from
    # wherever infer runs
    import sys

    from helpers import run

    (tmp_path / "trained" / "models").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "trained" / "models" / "mine.py").write_text(
        "from fastsample.nn.sage import GraphSAGE\n\n\ndef build(in_dim, num_classes, config):\n"
        "    return GraphSAGE(in_dim, config.hidden, num_classes, 2)\n")
    python = lambda cwd, *args: run([sys.executable, "-m", *args], timeout=300, cwd=tmp_path / cwd)
    trained = python("trained", "fastsample.train", "--data", root / "g", "--model", "models/mine.py:build",
                     "--fanouts", "4,4", "--hidden", "16", "--batch-size", "64", "--epochs", "1", "--threads", "1",
                     "--eval-every", "0", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert trained.returncode == 0, trained.stderr
    write_synthetic(tmp_path / "other", SynthConfig(num_nodes=300, avg_degree=4, num_classes=DIMS["classes"],
                                                    feature_dim=DIMS["in_dim"], seed=1), progress=False)
    infer = lambda out, *flags: python("elsewhere", "fastsample.infer", "--data", tmp_path / "other", "--checkpoint",
                                       tmp_path / "ck" / "epoch-0.pt", "--out", tmp_path / out, "--quiet", *flags)
    refused = infer("refused")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert re.search(r"epoch-0\.pt: trained on other data than \S+other \(name 'synthetic-700' there, "
                     r"'synthetic-300' here; num_nodes 700 there, 300 here; num_edges \d+ there, \d+ here\); pass "
                     r"--other-data to apply its model", refused.stderr), refused.stderr
    assert not (tmp_path / "refused").exists()
    applied = infer("applied", "--other-data")
    assert applied.returncode == 0, applied.stderr
    assert np.load(tmp_path / "applied" / "part-0.npy").shape == (300, DIMS["classes"])
    assert json.loads((tmp_path / "applied" / "index.json").read_text())["model"] == \
        f"{tmp_path / 'trained' / 'models' / 'mine.py'}:build"  # the file that ran
    (tmp_path / "trained" / "models" / "mine.py").unlink()  # in neither place now: said so, naming both
    gone = infer("gone", "--other-data")
    assert gone.returncode == 2 and f"its model models/mine.py:build: models/mine.py is not in the working " \
        f"directory nor in {tmp_path / 'trained'}, where it trained" in gone.stderr, gone.stderr


def test_a_damaged_orig_ids_is_named_before_inference(root, tmp_path):
    # infer writes orig_ids.npy beside the rows at the end: a truncated or short one was a
    # traceback there (or written as it was); it is checked on reading, naming the file
    import shutil

    from fastsample.export import orig_ids
    from fastsample.partition import load_partition

    shutil.copytree(root / "p1", tmp_path / "p")
    part, file = load_partition(tmp_path / "p", 0, 1), tmp_path / "p" / "orig_ids.npy"
    assert len(orig_ids(part, tmp_path / "p")) == part.num_nodes
    np.save(file, np.arange(10))
    with pytest.raises(ValueError, match=r"orig_ids\.npy: int64 \(10,\), expected one integer id per node \(700\)"):
        orig_ids(part, tmp_path / "p")
    file.write_bytes(file.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"orig_ids\.npy: unreadable"):
        orig_ids(part, tmp_path / "p")


def test_a_model_without_layers_is_refused(root):
    with pytest.raises(TypeError, match="needs num_layers and layer"):
        layerwise(torch.nn.Linear(3, 3), root / "g")


@pytest.mark.mpi
@pytest.mark.slow
def test_infer_writes_what_the_trainers_full_evaluation_saw(root, tmp_path):
    log, ck, out = tmp_path / "log.jsonl", tmp_path / "ck", tmp_path / "out"
    # the training, the inference and a second inference to the same place in one launch
    # (helpers.run_commands: each its own exit status and output, one after another)
    trained, proc, again = run_commands(2, [
        ("fastsample.train", ["--data", root / "p2", "--fanouts", "4,4,4", "--hidden", "16", "--batch-size", "32",
                              "--epochs", "1", "--threads", "1", "--eval", "full", "--eval-batch-size", "50",
                              "--checkpoint-dir", ck, "--log-json", log, "--quiet"]),
        ("fastsample.infer", ["--data", root / "p2", "--checkpoint", ck / "epoch-0.pt", "--out", out, "--batch-size",
                              "64", "--quiet"]),
        ("fastsample.infer", ["--data", root / "p2", "--checkpoint", ck / "epoch-0.pt", "--out", out])],
        tmp_path / "runs", timeout=300)
    assert trained.returncode == 0, trained.stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout.count("\n") == 1, proc.stdout + proc.stderr
    index = json.loads((out / "index.json").read_text())
    assert index["num_parts"] == 2 and index["width"] == DIMS["classes"] and index["model"] == "sage"
    assert index["architecture"] == "GraphSAGE"
    h = np.concatenate([np.load(out / f) for f in index["files"]])
    assert h.shape == (700, DIMS["classes"]) and h.dtype == np.float32
    # the test accuracy of the written outputs is the one the trainer logged for that epoch
    ds, orig = load_dataset(root / "g"), np.load(out / "orig_ids.npy")
    pred = np.empty(700, np.int64)
    pred[orig] = h.argmax(1)
    test_acc = float((pred[ds.test] == ds.labels[ds.test]).mean())
    assert test_acc == read_records(log)[-1]["test_acc"]
    # and a second run does not overwrite it unasked
    assert again.returncode == 2 and again.stderr == (f"python -m fastsample.infer: error: rank 0, in start-up checks: {out}: already "
                                                      "exists (pass --overwrite to replace it)\n"), again.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_vanilla_full_evaluation_equals_hybrids(root, tmp_path):
    # layer-wise inference from vanilla shares (each rank's own rows' in-edges, no whole
    # topology) gives hybrid's outputs bitwise; so --eval full in vanilla mode gives the
    # same accuracies as in hybrid mode, at 2 ranks
    partition_dataset(root / "g", tmp_path / "both", 2, mode="both", progress=False)
    torch.manual_seed(1)
    torch.save(make_model("sage").state_dict(), tmp_path / "state.pt")
    # both modes in one launch
    layerwise_on_ranks(2, [{"part": tmp_path / "both", "kind": "sage", "state": tmp_path / "state.pt",
                            "out": tmp_path / mode, "mode": mode} for mode in ("hybrid", "vanilla")])
    for r in range(2):
        got, want = np.load(tmp_path / f"vanilla-{r}.npy"), np.load(tmp_path / f"hybrid-{r}.npy")
        assert np.abs(want).max() > 0.1 and np.array_equal(got, want), f"rank {r}"
    # both trainings in one launch (helpers.train_many: the command's main() per run)
    runs = train_many(tmp_path / "both", 2, {mode: (tmp_path / f"{mode}.jsonl", [
        "--mode", mode, "--fanouts", "4,4", "--hidden", "16", "--batch-size", "32", "--epochs", "2", "--threads", "1",
        "--eval", "full", "--eval-batch-size", "50", "--quiet"]) for mode in ("hybrid", "vanilla")}, timeout=300)
    hybrid, vanilla = runs["hybrid"], runs["vanilla"]
    for key in ("step_losses", "val_acc", "test_acc"):
        assert [r[key] for r in vanilla] == [r[key] for r in hybrid], key
    assert all(r["val_acc"] is not None for r in hybrid)


@pytest.mark.mpi
def test_infer_on_a_missing_checkpoint_is_one_line_and_writes_nothing(root, tmp_path):
    proc = mpiexec(2, "-m", "fastsample.infer", "--data", root / "p2", "--checkpoint", tmp_path / "none.pt",
                   "--out", tmp_path / "out", timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "none.pt" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.mpi
def test_infer_on_a_vanilla_only_partition(root, tmp_path):
    # a vanilla-only partition has no whole topology; each rank's own rows are enough
    import torch

    partition_dataset(root / "g", tmp_path / "van", 2, mode="vanilla", progress=False)
    # the training and both inferences in one launch (helpers.run_many: each command's main()), each exits 0
    train = ["--data", tmp_path / "van", "--mode", "vanilla", "--fanouts", "4,4", "--hidden", "16", "--batch-size",
             "32", "--epochs", "1", "--threads", "1", "--eval-every", "0", "--checkpoint-dir", tmp_path / "ck",
             "--quiet"]
    run_many(2, [("fastsample.train", train)] + [
        ("fastsample.infer", ["--data", data, "--checkpoint", tmp_path / "ck" / "epoch-0.pt", "--out", tmp_path / out,
                              "--quiet"]) for data, out in ((tmp_path / "van", "v"), (root / "p2", "h"))], timeout=300)
    # the same model over the same graph: the same outputs per dataset node, whichever layout
    got = {}
    for out, part in (("v", tmp_path / "van"), ("h", root / "p2")):
        h = np.concatenate([np.load(tmp_path / out / f"part-{r}.npy") for r in range(2)])
        by_node = np.empty_like(h)
        by_node[np.load(part / "orig_ids.npy")] = h
        got[out] = by_node
    assert np.allclose(got["v"], got["h"], rtol=1e-5, atol=1e-6) and torch is not None


def test_rows_that_are_not_finite_are_refused_not_exported(root, tmp_path):
    # NaN feature rows went into the export as answers (exit 0); training stops on them
    import shutil

    shutil.copytree(root / "p1", tmp_path / "p")
    proc = run_module("fastsample.train", "--data", tmp_path / "p", "--epochs", "1", "--fanouts", "3,3", "--hidden",
                      "8", "--batch-size", "64", "--threads", "1", "--quiet", "--checkpoint-dir", tmp_path / "ck")
    assert proc.returncode == 0, proc.stderr
    features = np.load(tmp_path / "p" / "part-0" / "features.npy")
    features[5] = np.nan
    np.save(tmp_path / "p" / "part-0" / "features.npy", features)
    proc = run_module("fastsample.infer", "--data", tmp_path / "p", "--checkpoint", tmp_path / "ck" / "epoch-0.pt",
                      "--out", tmp_path / "out", "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "error: rank 0, in writing the output: " in proc.stderr, proc.stderr
    assert " of the 700 rows on rank 0 are not finite (the first: partition id " in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
