"""python -m fastsample.plan: the command line, the consistency of its figures, and its
expected MFG sizes against the real sampler."""

import json
import math

import numpy as np
import pytest

from fastsample.data.graph import load_dataset
from fastsample.partition import partition_dataset
from fastsample.partition import memory
from fastsample.partition.balance import type_cap
from fastsample.plan import PlanConfig, expected_mfgs, main, plan
from fastsample.sampling import sample

from helpers import run_module

PAPERS = dict(nodes=111_059_956, edges=3_231_371_744, feature_dim=128, classes=172)


def test_the_command_prints_a_plan_and_help_says_what_edges_are():
    proc = run_module("fastsample.plan", "--nodes", "500000", "--edges", "10085906", "--feature-dim", "100",
                      "--ranks", "2", "--ranks-per-machine", "2", "--memory", "64G", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for part in ("expected MFGs", "feature shard", "sampler node map", "step peak", "rank total",
                 "topology (shared, page cache)", "machine total", "fits in 64.0 GiB (--memory)",
                 "METIS", "KaMinPar", "--method auto: metis"):
        assert part in proc.stdout, (part, proc.stdout)
    helped = run_module("fastsample.plan", "--help", timeout=60)
    assert helped.returncode == 0 and "stored directed edges" in helped.stdout and "E = 2M" in helped.stdout
    # grouped as the trainer's is, and no word of a flag plan does not have
    sections = [line for line in helped.stdout.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert sections[:5] == ["options:", "the graph:", "the cluster:", "the job's shape:", "output:"], sections
    assert "--task" not in helped.stdout


def test_json_is_the_plan(capsys):
    assert main(["--nodes", "1000", "--edges", "20000", "--feature-dim", "8", "--json", "--memory", "1G"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["graph"]["id_dtype"] == "int32" and p["per_machine"]["fits"] is True
    assert len(p["mfgs"]) == 3 and p["mfgs"][-1]["num_dst"] == 1000


@pytest.mark.parametrize("argv, flag", [
    (["--ranks", "0"], "--ranks must be positive (got 0)"),
    (["--edges", "many"], "--edges: expected an int (got 'many')"),
    (["--feature-dtype", "float64"], "argument --feature-dtype: invalid choice: 'float64'"),
    (["--ranks", "4", "--ranks-per-machine", "8"], "--ranks-per-machine must be at most the ranks, 4 (got 8)"),
    (["--memory", "lots"], "--memory must be a size such as 256G, 512GiB or a byte count (got 'lots')"),
    (["--fanouts", "5,0"], "--fanouts must be positive or -1 (got 5,0)"),
    (["--layers", "2"], "--layers 2 needs 2 fanouts, got [15, 10, 5]"),
    (["--cache-fraction", "1"], "--cache-fraction must be in [0, 1) (got 1.0)"),
])
def test_a_bad_flag_is_one_line_naming_it_and_exit_2(capsys, argv, flag):
    with pytest.raises(SystemExit) as e:
        main(["--nodes", "1000", "--edges", "20000", "--feature-dim", "8", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and flag in err and "Traceback" not in err, err
    assert err.startswith("python -m fastsample.plan: error: ")


def test_a_missing_required_flag_is_named():
    proc = run_module("fastsample.plan", "--nodes", "10", "--edges", "10", timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--feature-dim" in proc.stderr, proc.stderr


def _plan(**kw):
    return plan(PlanConfig(**{"memory": "256G", **kw}))


def test_topology_follows_the_dtype_rule_exactly():
    # papers100M: int32 ids (N < 2^31), int64 indptr (E >= 2^31)
    p = _plan(**PAPERS, ranks=16, ranks_per_machine=4)
    n, e = PAPERS["nodes"], PAPERS["edges"]
    assert (p["graph"]["id_dtype"], p["graph"]["indptr_dtype"]) == ("int32", "int64")
    assert p["per_machine"]["topology"] == p["topology_bytes"] == (n + 1) * 8 + e * 4
    # the project's rule (graph.py): indptr int32 while E < 2^31 ...
    small = _plan(nodes=500_000, edges=10_085_906, feature_dim=100)
    assert small["topology_bytes"] == 500_001 * 4 + 10_085_906 * 4 == 42_343_628
    # ... and everything int64 once the ids are
    big = _plan(nodes=2**31 + 5, edges=2**32, feature_dim=4, ranks=64)
    assert big["topology_bytes"] == (2**31 + 6) * 8 + 2**32 * 8


@pytest.mark.parametrize("dtype, size", [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("ranks", [1, 3, 16])
def test_shards_add_up_to_the_whole_feature_matrix(dtype, size, ranks):
    n, f = 1_000_003, 100
    p = _plan(nodes=n, edges=20 * n, feature_dim=f, feature_dtype=dtype, ranks=ranks, ranks_per_machine=1)
    rows = p["per_rank"]["shard_rows"]
    assert len(rows) == ranks and sum(rows) == n and max(rows) - min(rows) <= 1
    assert sum(r * f * size for r in rows) == n * f * size
    # the largest rank's shard: the partitioner's stated balance, 5 % over the mean (balance.py)
    assert p["per_rank"]["feature_shard"] == type_cap(n, ranks) * f * size
    assert ranks > 1 or type_cap(n, ranks) == n


@pytest.mark.parametrize("precision, dtype, size", [("bf16", "float32", 2), ("bf16", "float16", 2),
                                                   ("int8", "float32", 1), ("int8", "float16", 1)])
def test_reduced_precisions_hold_the_features_in_fewer_bytes(precision, dtype, size):
    # --precision bf16 narrows float32 features into memory, int8 quantizes any: the shard,
    # the cache and the gather's buffers hold them so
    n, f, ranks = 1_000_003, 100, 4
    shape = dict(nodes=n, edges=20 * n, feature_dim=f, feature_dtype=dtype, ranks=ranks, cache_fraction=0.1)
    stored, held = _plan(**shape), _plan(**shape, precision=precision)
    assert held["per_rank"]["feature_shard"] == type_cap(n, ranks) * f * size
    rows = held["per_rank"]["cache_rows"]
    assert held["per_rank"]["feature_cache"] == rows * (f * size + 8) and rows == stored["per_rank"]["cache_rows"]
    inputs = held["mfgs"][0]["num_src"]  # the buffers' rows, besides their ids (5 int64 each)
    rows_bytes = [p["per_rank"]["step"]["gather_buffers"] - inputs * 5 * 8 for p in (held, stored)]
    assert rows_bytes[0] * np.dtype(dtype).itemsize == pytest.approx(rows_bytes[1] * size)


def test_hybrid_topology_is_per_machine_and_ranks_add_to_the_machine():
    totals = {}
    for r in (1, 2, 4, 8):
        p = _plan(**PAPERS, ranks=16, ranks_per_machine=r)
        assert p["per_machine"]["topology"] == p["topology_bytes"]  # one copy whatever R is
        totals[r] = p["per_machine"]["total"]
        rank = p["per_rank"]["total"]
        assert totals[r] == p["topology_bytes"] + p["per_machine"]["libraries"] + r * rank
    assert totals[1] < totals[2] < totals[4] < totals[8]
    vanilla = _plan(**PAPERS, ranks=16, ranks_per_machine=4, mode="vanilla")
    assert vanilla["per_machine"]["topology"] == 0
    part = vanilla["per_rank"]["topology_part"]
    # the largest part: its nodes and in-edges at the partitioner's caps, 5 % over an even share
    assert 16 * part == pytest.approx(1.05 * vanilla["topology_bytes"], rel=1e-4)


def test_more_ranks_shrink_the_shard_but_not_the_node_map_or_the_step():
    a, b = _plan(**PAPERS, ranks=8), _plan(**PAPERS, ranks=64)
    assert b["per_rank"]["feature_shard"] < a["per_rank"]["feature_shard"] / 7.9
    # above 8M nodes the sampler's map is a hash table sized by the batch (native/node_map.hpp):
    # 8 B x the power of two >= twice the batch's input nodes, not 8 B x every node
    inputs = a["mfgs"][0]["num_src"]
    assert a["per_rank"]["node_map"] == b["per_rank"]["node_map"] == 8 * 2 ** math.ceil(math.log2(2 * inputs))
    assert a["per_rank"]["node_map"] < 32 << 20
    assert _plan(nodes=8 << 20, edges=10 ** 8, feature_dim=100, classes=10, ranks=8)["per_rank"]["node_map"] == 8 * (8 << 20)  # direct
    assert a["per_rank"]["step"]["activations"] == b["per_rank"]["step"]["activations"]


def test_model_state_is_graphsage_parameters():
    p = _plan(nodes=1000, edges=20000, feature_dim=100, hidden=256, classes=47)
    params = (2 * 100 * 256 + 256) + (2 * 256 * 256 + 256) + (2 * 256 * 47 + 47)
    assert p["model"]["parameters"] == params
    from fastsample.nn.sage import GraphSAGE

    assert sum(t.numel() for t in GraphSAGE(100, 256, 47, 3).parameters()) == params


def test_partition_figures_are_the_partitioners_own_and_auto_follows_memory():
    n, e = PAPERS["nodes"], PAPERS["edges"]
    roomy, tight = _plan(**PAPERS, ranks=8, memory="4T"), _plan(**PAPERS, ranks=8, memory="256G")
    assert roomy["partition"]["metis_peak"] == memory.metis_peak_bytes(n, 2 * e)  # auto's bound: 2E
    assert roomy["partition"]["kaminpar_peak"] == memory.kaminpar_peak_bytes(n, 2 * e)
    assert (roomy["partition"]["auto"], tight["partition"]["auto"]) == ("metis", "kaminpar")
    assert tight["partition"]["why"] == memory.choose_method(n, 2 * e, 256 * 2**30)[1]


def test_fits_or_not_against_the_memory():
    assert _plan(**PAPERS, ranks=16, ranks_per_machine=4, memory="512G")["per_machine"]["fits"] is True
    small = _plan(**PAPERS, ranks=16, ranks_per_machine=4, memory="16G")
    assert small["per_machine"]["fits"] is False


# The calibration: the planner's expected MFG sizes against the fused sampler on a graph
# from the synthetic generator (the small preset's size and degree; the generator's degree
# law is the one the planner models). On the 100k to 4M-node synthetic graphs the model is
# within 7.2 % per layer (docs/cluster.md, "Planning memory"); on this graph the worst layer is
# 5.8 % off (fanout 25 at the seeds: the generator merges duplicate edges, so hubs have
# fewer and the rest a little more than the model gives them), and the mean over 12 steps
# moves by < 1 % with the seed. 10 % allows that and still fails a model that ignores
# duplicate picks (layer 0 inputs > +100 %), takes min(fanout, mean degree) picks per node
# (+25 % and more), or whose degree law's exponent is off by 0.2 (layer 0: -32 % at 2.1,
# +28 % at 2.5).
CALIBRATION_TOLERANCE = 0.10


@pytest.fixture(scope="module")
def synth_graph(tmp_path_factory):
    from fastsample.data.synth import SynthConfig, write_synthetic

    path = tmp_path_factory.mktemp("plan") / "g"
    write_synthetic(path, SynthConfig(num_nodes=100_000, avg_degree=20, train_frac=0.3), progress=False)
    return load_dataset(path)


@pytest.mark.parametrize("fanouts, batch", [((15, 10, 5), 500), ((10, 25), 1000)])
def test_expected_mfg_sizes_match_the_sampler(synth_graph, fanouts, batch):
    g = synth_graph.graph
    rng = np.random.default_rng(0)
    train = np.asarray(synth_graph.train)
    steps = []
    for step in range(12):
        seeds = np.sort(rng.choice(train, batch, replace=False))
        mfgs = sample(g, seeds, fanouts, seed=0, step=step)
        steps.append([(m.num_dst, m.num_edges, m.num_src) for m in mfgs])
    measured = np.mean(steps, axis=0)
    predicted = expected_mfgs(g.num_nodes, g.num_edges, fanouts, batch)
    for layer, (p, (dst, edges, src)) in enumerate(zip(predicted, measured)):
        for name, want, got in (("dst", dst, p.num_dst), ("edges", edges, p.num_edges), ("src", src, p.num_src)):
            assert got == pytest.approx(want, rel=CALIBRATION_TOLERANCE), (layer, name, got, want)
    # the naive bound batch x prod(fanouts) is far off: the test can tell a model from it
    naive_inputs = batch * math.prod(f + 1 for f in fanouts)
    assert naive_inputs > 1.5 * measured[0][2]


def test_a_typed_dataset_is_planned_per_type(tmp_path):
    # per-type shards at their own widths, a byte per edge of types, the R-GCN's state and
    # the featureless types' embedding tables, sharded; the sizes read from the dataset itself
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

    write_typed_synthetic(tmp_path / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    ds = load_dataset(tmp_path / "h")
    p = _plan(dataset=str(tmp_path / "h"), ranks=3, ranks_per_machine=3, fanouts=(5, 5))
    g = ds.graph
    assert p["graph"]["nodes"] == g.num_nodes and p["graph"]["edges"] == g.num_edges
    counts = np.diff(g.node_type_offset)
    want_shard = sum(type_cap(c, 3) * f.shape[1] * f.itemsize for c, f in zip(counts, ds.features.values())
                     if f is not None)
    assert p["per_rank"]["feature_shard"] == want_shard
    assert p["topology_bytes"] == (g.num_nodes + 1) * 4 + g.num_edges * (4 + 1)
    institutes = counts[g.node_types.index("institute")]
    assert p["model"]["kind"] == "R-GCN" and p["model"]["embedding_values"] == institutes * 64
    assert p["per_rank"]["model_state"] == 5 * 4 * p["model"]["parameters"] + 3 * 4 * type_cap(institutes, 3) * 64
    untyped = _plan(nodes=g.num_nodes, edges=g.num_edges, feature_dim=16, ranks=3, ranks_per_machine=3, fanouts=(5, 5))
    assert untyped["model"]["kind"] == "GraphSAGE" and untyped["topology_bytes"] < p["topology_bytes"]
    # a partition of it plans the same, for its parts unless --ranks says otherwise
    partition_dataset(tmp_path / "h", tmp_path / "h3", 3, progress=False)
    q = _plan(dataset=str(tmp_path / "h3"), ranks_per_machine=3, fanouts=(5, 5))
    assert q["config"].pop("dataset") != p["config"].pop("dataset") and q == p
    assert _plan(dataset=str(tmp_path / "h3"), ranks=1, fanouts=(5, 5))["config"]["ranks"] == 1
