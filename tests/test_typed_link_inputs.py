"""Bad typed and link inputs (issue 37): each is one line naming the file or flag, a
non-zero exit, and nothing left behind (no output, no hidden temporary)."""

import json
import shutil

import numpy as np
import pytest

from conftest import run_module
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

RELATION = "author,rev_written_by,paper"


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-typed")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    run_module("fastsample.data", "link-split", root / "h", root / "link", "--relation", RELATION, "--quiet",
               check=True)
    return root


def one_line(proc, *expected: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stdout + proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def left(folder) -> list[str]:
    """What a failed command left in ``folder`` beside the inputs: outputs and hidden temporaries."""
    return sorted(f.name for f in folder.iterdir() if f.name.startswith(".") or f.name.startswith("out"))


def copy_with(typed, tmp_path, src: str, edit) -> str:
    """A copy of ``src`` with ``edit(copy)`` applied."""
    bad = tmp_path / f"bad-{src}"
    shutil.copytree(typed / src, bad)
    edit(bad)
    return bad


def test_a_relation_that_does_not_exist(typed, tmp_path):
    proc = run_module("fastsample.data", "link-split", typed / "h", tmp_path / "out", "--relation",
                      "author,wrote,paper")
    one_line(proc, "--relation: author:wrote:paper is not an edge type (the graph's: paper:cites:paper")
    assert left(tmp_path) == []


@pytest.fixture(scope="module")
def trained(typed, tmp_path_factory) -> tuple[dict, object]:
    """typed/h partitioned for 2 ranks (python -m fastsample.partition), and the two trainer
    runs of the tests below on it in one launch (helpers.run_commands: each its own exit
    status and output): ({test: its result}, the directory their paths are in)."""
    from helpers import run_commands

    root = tmp_path_factory.mktemp("typed-trained")
    run_module("fastsample.partition", typed / "h", root / "p2", "--parts", "2", "--quiet", check=True)
    runs = {"relation_fanouts": ["--fanouts", "3,3", "--relation-fanouts", "cites=2;nosuch=1", "--epochs", "1",
                                 "--threads", "1", "--checkpoint-dir", root / "out-ck"],
            "start-up line": ["--fanouts", "3,3", "--epochs", "1", "--max-steps", "1", "--eval-every", "0", "--threads",
                              "1", "--quiet", "--matmul", "onednn"]}
    results = run_commands(2, [("fastsample.train", ["--data", root / "p2", *args]) for args in runs.values()],
                           root / "out")
    return dict(zip(runs, results)), root


@pytest.mark.mpi
def test_relation_fanouts_naming_an_unknown_relation(trained):
    proc, root = trained[0]["relation_fanouts"], trained[1]
    one_line(proc, "--relation-fanouts: layer 1: relation 'nosuch' is not an edge type")
    assert proc.returncode == 2 and not (root / "out-ck").exists()


def test_node_type_offsets_that_are_not_increasing(typed, tmp_path):
    def swap(folder):
        meta = json.loads((folder / "meta.json").read_text())
        off = meta["node_type_offset"]
        off[1], off[2] = off[2], off[1]
        (folder / "meta.json").write_text(json.dumps(meta))

    bad = copy_with(typed, tmp_path, "h", swap)
    proc = run_module("fastsample.partition", bad, tmp_path / "out", "--parts", "2")
    one_line(proc, f"{bad / 'meta.json'}: node_type_offset must be 5 non-decreasing offsets from 0")
    assert left(tmp_path) == []


def test_a_node_type_with_no_rows_that_edges_point_into(typed, tmp_path):
    def empty_institutes(folder):
        meta = json.loads((folder / "meta.json").read_text())
        off = meta["node_type_offset"]  # paper, author, institute, fos
        off[3] = off[2]
        (folder / "meta.json").write_text(json.dumps(meta))

    bad = copy_with(typed, tmp_path, "h", empty_institutes)
    for module, args in (("fastsample.partition", [bad, tmp_path / "out", "--parts", "2"]),
                         ("fastsample.data", ["link-split", bad, tmp_path / "out", "--relation", RELATION])):
        proc = run_module(module, *args)
        one_line(proc, f"{bad / 'indices.npy'}: edge ", "outside institute's ids")
    assert left(tmp_path) == []


def test_a_relation_with_no_edges_is_not_split(typed, tmp_path):
    # every edge of rev_affiliated_to (institute -> author) removed: nothing to hold out
    from fastsample.data.edge_splits import make_edge_split
    from fastsample.data.graph import CSCGraph, DatasetError, load_dataset

    g = load_dataset(typed / "h").graph

    r = g.relation("rev_affiliated_to")
    keep = g.type_per_edge != r
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=g.num_nodes))])
    empty = CSCGraph(indptr, np.asarray(g.indices)[keep], np.asarray(g.type_per_edge)[keep], g.node_type_offset,
                     g.node_types, g.edge_types)
    with pytest.raises(DatasetError, match="^relation: institute:rev_affiliated_to:author has no edges to split"):
        make_edge_split(empty, 0.1, 0.1, relation="rev_affiliated_to")


def test_an_edge_split_whose_ids_are_of_another_type(typed, tmp_path):
    def author_as_paper(folder):
        val = np.load(folder / "link" / "val.npy")
        val[3, 1] = val[3, 0]  # the source, an author, where a paper belongs: in range for the graph
        np.save(folder / "link" / "val.npy", val)

    bad = copy_with(typed, tmp_path, "link", author_as_paper)
    for module, args in (("fastsample.data", ["info", bad]), ("fastsample.partition", [bad, tmp_path / "out",
                                                                                     "--parts", "2"]),
                         ("fastsample.train", ["--data", bad, "--task", "link", "--epochs", "1"])):
        proc = run_module(module, *args)
        one_line(proc, f"{bad / 'link' / 'val.npy'}: row 3's destination is not a paper node (relation "
                 "author:rev_written_by:paper; paper ids are 0..")
    assert left(tmp_path) == []


@pytest.mark.mpi
def test_the_typed_start_up_line_says_whose_products_run(trained):
    # the R-GCN's products run on the engine --matmul names, as GraphSAGE's do, and no warning
    proc = trained[0]["start-up line"]
    assert proc.returncode == 0, proc.stderr
    assert "matmul fp32 onednn" in proc.stdout.splitlines()[1], proc.stdout
    assert proc.stderr.strip() == "", proc.stderr
