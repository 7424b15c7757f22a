"""python -m fastsample.data: make, convert and inspect dataset directories."""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import replace

from fastsample.atomic import DiskFull, NotWritable
from fastsample import cli
from fastsample.cli import Parser, fail, report
from fastsample.data.graph import DatasetError, carried, load_dataset, write_dataset
from fastsample.data.targets import TARGETS

EPILOG = """\
examples:
  python -m fastsample.data synth data/small
  python -m fastsample.data synth --preset products data/products
  python -m fastsample.data planetoid RAW --name cora data/cora     # RAW: the ind.cora.* files
  python -m fastsample.data ogb downloads/ogbn_products data/products-ogb
  python -m fastsample.data igb downloads/igbh data/igbh-tiny --size tiny       # MLPerf R-GAT's graph
  python -m fastsample.data info data/cora --check    # --check: report NaN/inf feature rows
  python -m fastsample.data link-split data/cora data/cora-link --val-fraction 0.05 --test-fraction 0.1
  python -m fastsample.data tables my-spec.yaml data/mine   # your node and edge tables (Parquet, CSV)
  python -m fastsample.data targets data/small data/small-edges --task edge-class   # another task's labels

Undirected inputs are stored with both directions; duplicate edges are merged and
self-loops dropped (see fastsample/data/edges.py). Writes are atomic: an interrupted
run leaves no directory that looks complete.
"""

OGB_DESCRIPTION = """\
Convert an OGB node- or link-property directory. Four raw layouts are read:

  npz (ogbn-papers100M): raw/data.npz (edge_index, node_feat), raw/node-label.npz;
       streamed, in O(num_nodes) memory plus about 1 GB
  CSV (most others):     raw/edge.csv.gz, num-node-list, node-feat, node-label .csv.gz;
       parsed in memory
  heterogeneous (ogbn-mag): raw/num-node-dict.csv.gz, raw/relations/SRC___REL___DST/
       edge.csv.gz, raw/node-feat/TYPE/, raw/node-label/TYPE/; a typed dataset, each
       relation with its reverse (rev_REL) unless --directed; parsed in memory
  link (ogbl-*): raw/edge.csv.gz, num-node-list, node-feat .csv.gz and split/NAME/
       {train,valid,test}.pt (torch files read weights-only: no code runs; .npz with the
       same keys also serves); a link-split dataset (fastsample/data/ogb_link.py) for
       --task link, each held-out edge with its own negatives (target_node_neg)

If raw/data.npz exists the npz layout is read and any CSV files beside it are ignored.
Splits: split/NAME/{train,valid,test}.csv.gz (heterogeneous: split/NAME/TYPE/...).
"""

IGB_DESCRIPTION = """\
Convert IGB's heterogeneous dataset (IGBH, MLPerf R-GAT's graph) from its processed layout
into a typed dataset (target type paper), as MLPerf's reference builds it
(mlcommons/training retired_benchmarks/rgat: dataset.py, split_seeds.py):

  ROOT/SIZE/processed/             ROOT may also be ROOT/SIZE or the processed/ directory
    TYPE/node_feat.npy             (nodes, F) floats per node type: paper, author, institute,
                                   fos (+ journal, conference for large, full); the node
                                   counts come from these. Without a .npy header (large and
                                   full's paper and author) a file is raw float32 rows of
                                   MLPerf's count (papers: 100M large, 269,346,174 full)
    SRC__REL__DST/edge_index.npy   (E, 2) integer (src, dst) rows, ids local to each type:
                                   paper__cites__paper, paper__written_by__author,
                                   author__affiliated_to__institute, paper__topic__fos (+
                                   paper__published__journal, paper__venue__conference)
    paper/node_label_2K.npy, node_label_19.npy   a label per paper (.npy or raw float32)

Edge types: cites, written_by, affiliated_to, topic, rev_written_by, rev_affiliated_to,
rev_topic (+ published, venue, rev_published, rev_venue), each rev_ the relation backwards.
cites is made symmetric with a self-loop on every paper, as the reference's
add_self_loops(remove_self_loops(cites)) in both directions, but with duplicates merged
(the reference holds each self-loop twice; here every edge is stored once per type).
Split (split_seeds.py): torch.manual_seed(--seed); shuffled = torch.randperm(n), n the
labelled papers (the paper count; full: 157,675,969 with 2K labels, 227,130,858 with 19);
train = the first int(0.6 n), val the next int(--validation-frac n); test empty, as the
reference has none, unless --test-rest.

Streams: edges are read in blocks and built into the CSC by destination range on disk,
features copied in blocks. Peak memory of the conversion:
  {bound}
  (measured: 1.95 GiB for 10.1M nodes, 224M edges; IGBH-full, ~547M nodes: about 23 GB);
the check that follows (as `info`) memory-maps the output's arrays.
"""

# CLI flag -> SynthConfig field, with help text; defaults come from the preset.
SYNTH_FLAGS = {
    "nodes": ("num_nodes", int, "number of nodes"),
    "avg-degree": ("avg_degree", float, "mean in-degree before duplicates are merged"),
    "classes": ("num_classes", int, "number of communities = classes"),
    "feature-dim": ("feature_dim", int, "feature width"),
    "feature-dtype": ("feature_dtype", str, "float32, or float16 (half the disk and page cache)"),
    "exponent": ("exponent", float, "power-law exponent of the degree distribution (> 2)"),
    "max-degree": ("max_degree", int, "cap on a node's expected degree (default 400 x avg degree)"),
    "intra": ("intra", float, "fraction of edges inside a community (homophily)"),
    "signal": ("signal", float, "class-centroid scale against unit feature noise"),
    "train-frac": ("train_frac", float, "fraction of nodes in the training split"),
    "val-frac": ("val_frac", float, "fraction of nodes in the validation split"),
    "test-frac": ("test_frac", float, "fraction of nodes in the test split"),
    "seed": ("seed", int, "random seed (the output depends only on the parameters)"),
}


def build_parser() -> argparse.ArgumentParser:
    from fastsample.data.planetoid import NAMES
    from fastsample.data.synth import PRESETS
    from fastsample.data.synth_typed import TYPED_PRESETS

    p = Parser(prog="python -m fastsample.data", description=__doc__.split(":", 1)[1].strip(), epilog=EPILOG)
    sub = p.add_subparsers(dest="command", required=True)  # usage lists every command

    s = sub.add_parser("synth", help="generate a power-law graph with communities",
                       description="Generate a synthetic graph with heavy-tailed degrees and "
                       "community structure; labels are communities, features are noisy class "
                       "centroids (a GNN beats an MLP on it).")
    s.add_argument("out", help="dataset directory to write")
    s.add_argument("--preset", choices=sorted(PRESETS) + sorted(TYPED_PRESETS), default="small",
                   help="starting parameters: tiny (2k nodes), small (100k, the default), "
                   "medium (500k nodes, ~10M edges), products (2.4M nodes, ~120M edges, like ogbn-products), "
                   "large (16M nodes, ~1.0B edges, float16 features: 7.7 GiB on disk, 3-5 min on 2 cores); "
                   "typed graphs with IGBH's schema (paper, author, institute, fos; 8 relations; labels on "
                   "papers; fastsample/data/synth_typed.py): hetero-tiny (5k nodes), hetero-small (52k nodes, "
                   "0.6M edges), hetero-medium (1M nodes, 21M edges), hetero-large (18.3M nodes, 324M edges, "
                   "float16 features: ~6 GB, ~4 min, ~10 GiB peak). The flags below shape the untyped presets")
    for flag, (_, typ, text) in SYNTH_FLAGS.items():
        s.add_argument(f"--{flag}", type=typ, help=text + " (default: from the preset)")
    s.add_argument("--threads", type=int, help="threads making edges (default: all cores; the graph does not "
                   "depend on it)")

    pl = sub.add_parser("planetoid", help="convert raw Planetoid files (ind.<name>.*)")
    pl.add_argument("raw_dir", help="directory holding ind.<name>.x, .tx, .allx, .y, .ty, .ally, "
                    ".graph, .test.index")
    pl.add_argument("--name", required=True, type=str.lower, choices=NAMES, help="which graph the files hold")
    pl.add_argument("out", help="dataset directory to write")

    og = sub.add_parser("ogb", help="convert an OGB node- or link-property directory (raw/ + split/)",
                        description=OGB_DESCRIPTION)
    og.add_argument("root", help="OGB dataset directory containing raw/ and split/")
    og.add_argument("out", help="dataset directory to write")
    og.add_argument("--split", help="name of the split under split/ (needed if several)")
    og.add_argument("--directed", action="store_true",
                    help="keep edges one-way (src -> dst), e.g. for ogbn-arxiv; default: undirected. On a "
                    "heterogeneous layout: keep exactly the relations given (default: add rev_REL for each)")

    from fastsample.data.igb import BOUND, LABELS, SIZES, VALIDATION_FRACTION, SEED

    ig = sub.add_parser("igb", help="convert IGB's heterogeneous dataset (IGBH, processed/ layout) as MLPerf R-GAT "
                        "reads it", description=IGB_DESCRIPTION.format(bound=BOUND))
    ig.add_argument("root", help="the directory holding SIZE/processed/ (or SIZE/'s processed/, or processed/ itself)")
    ig.add_argument("out", help="dataset directory to write")
    ig.add_argument("--size", required=True, choices=SIZES, help="which IGBH: the processed directory read, and "
                    "for large and full two more node types and relations, the headerless files' counts and full's "
                    "labelled papers")
    ig.add_argument("--labels", choices=LABELS, default=LABELS[0], help="paper/node_label_2K.npy (2,983 classes, "
                    "the benchmark's) or node_label_19.npy")
    ig.add_argument("--validation-frac", type=float, default=VALIDATION_FRACTION, help="val's share of the labelled "
                    "papers (split_seeds.py's command-line default, which the benchmark runs; its class default is "
                    "0.01)")
    ig.add_argument("--seed", type=int, default=SEED, help="torch.manual_seed of the split")
    ig.add_argument("--test-rest", action="store_true", help="test = the labelled papers in neither train nor val "
                    "(default: no test split, as the reference)")
    ig.add_argument("--feature-dtype", choices=("float32", "float16"), help="stored features (default: float16 "
                    "where the file's are, else float32; float16 halves the disk, as the reference's --use_fp16)")

    ls = sub.add_parser("link-split", help="hold out edges for link prediction (a new dataset directory)",
                        description="Copy DATASET to OUT with a seeded random fraction of its edges held out for "
                        "validation and test (removed from OUT's topology; an undirected graph's both directions "
                        "together), the rest kept as training positives, and NEGATIVES destinations per held-out "
                        "edge that its source has no edge to (for MRR and Hits@K). A typed dataset splits one relation (--relation). "
                        "See fastsample/data/edge_splits.py.")
    ls.add_argument("dataset", help="dataset directory to split")
    ls.add_argument("out", help="dataset directory to write")
    ls.add_argument("--val-fraction", type=float, default=0.05, help="fraction of the edges for validation "
                    "(default: 0.05)")
    ls.add_argument("--test-fraction", type=float, default=0.1, help="fraction of the edges for test (default: 0.1)")
    ls.add_argument("--negatives", type=int, default=100, help="fixed negatives per held-out edge (default: 100)")
    ls.add_argument("--seed", type=int, default=0, help="the split's random seed (default: 0)")
    ls.add_argument("--relation", metavar="SRC:REL:DST", help="typed datasets: the relation whose edges are split "
                    "(e.g. author:rev_written_by:paper, or with commas); its reverse relation's copies of held-out edges leave the topology "
                    "too, and negatives are drawn among DST nodes")

    tg = sub.add_parser("targets", help="derive another task's labels from a dataset's classes (a new dataset "
                        "directory)", description="Copy DATASET to OUT with the labels of another task, made from "
                        "its graph, features and classes: node-regression (a float target per node, a smooth "
                        "function of its neighbourhood's features), edge-class or edge-regression (labelled edges "
                        "of one relation, their labels a function of both endpoints' classes). For tests, "
                        "benchmarks and accuracy checks of those tasks; see fastsample/data/targets.py.")
    tg.add_argument("dataset", help="dataset directory with class labels")
    tg.add_argument("out", help="dataset directory to write")
    tg.add_argument("--task", required=True, choices=TARGETS, help="which task's labels to make")
    tg.add_argument("--relation", metavar="SRC:REL:DST", help="edge tasks on typed data: the relation whose edges "
                    "get labels (both endpoints of the labelled type, e.g. paper:cites:paper)")
    tg.add_argument("--classes", type=int, default=4, help="edge-class: the edge classes (default: 4)")
    tg.add_argument("--fractions", default="0.8,0.1,0.1", metavar="TRAIN,VAL,TEST",
                    help="edge tasks: the labelled edges' split (default: 0.8,0.1,0.1)")
    tg.add_argument("--seed", type=int, default=0, help="the targets' and split's random seed (default: 0)")

    tb = sub.add_parser("tables", help="build a dataset from node and edge tables (Parquet or CSV) described by a "
                        "spec", description="Build the dataset directory OUT from the node and edge tables SPEC "
                        "names (a JSON or YAML file: every key and transform is in fastsample/data/table_spec.py). "
                        "The tables are read in record batches; each node type's ids become dense ids, kept in "
                        "OUT/id_maps/TYPE.parquet so that every later output can be keyed back by them. A "
                        "duplicate or unknown id, a null where none may be, a column a transform cannot take, a "
                        "missing file or column: one line naming the file, the column and the row, exit status 2, "
                        "nothing left in OUT.")
    tb.add_argument("spec", help="the spec file (.json, .yaml or .yml)")
    tb.add_argument("out", help="dataset directory to write")
    tb.add_argument("--on-unknown", choices=("error", "drop"), default="error", help="an edge naming a node id that "
                    "its type's table lacks: error (count them, show the first few, write nothing) or drop (leave "
                    "those edges out, and say how many)")
    tb.add_argument("--transforms-from", metavar="DATASET", help="a dataset built from tables before (the one a "
                    "model trained on): apply its fitted transforms (standardize's mean and scale, to_categorical's "
                    "vocabulary) instead of fitting them on these tables, so that a later snapshot's features are "
                    "what the model learned from (infer --other-data refuses features transformed otherwise); "
                    "values outside its vocabulary get no category, and are counted")

    for cmd in (s, pl, og, ig, ls, tg, tb):
        cmd.add_argument("--overwrite", action="store_true", help="replace an earlier output of fastsample (a dataset, "
                         "partition or export) or an empty directory there; anything else is refused")
        cmd.add_argument("--quiet", action="store_true", help="no progress (--progress none)")
        cli.progress_flags(cmd)

    info = sub.add_parser("info", help="validate a dataset directory and summarise it")
    info.add_argument("dataset", help="dataset directory")
    info.add_argument("--check", action="store_true",
                      help="also read every feature row and report those holding NaN or inf (exit status 1 if any: "
                           "a non-finite input makes the loss NaN, see --on-nan in python -m fastsample.train)")
    for cmd in (s, pl, og, ig, ls, tg, tb, info):
        cmd.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def _in_flags(error: DatasetError, words: dict[str, str]) -> DatasetError:
    """The library's error in this CLI's words: each parameter named as its flag."""
    message = str(error)
    for word, flag in words.items():
        message = re.sub(rf"(?<![\w-]){re.escape(word)}(?![\w-])", flag, message)
    return DatasetError(message)


def _synth(args) -> None:
    from fastsample.data.synth import PRESETS, write_synthetic
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic

    given = {field: getattr(args, flag.replace("-", "_")) for flag, (field, _, _) in SYNTH_FLAGS.items()}
    if args.preset in TYPED_PRESETS:
        shaped = [f"--{flag}" for flag, (field, _, _) in SYNTH_FLAGS.items() if given[field] is not None]
        if shaped:
            raise DatasetError(f"{', '.join(shaped)}: shape the untyped presets only; --preset {args.preset} is "
                               "typed (its parameters: fastsample/data/synth_typed.py)")
        write_typed_synthetic(args.out, TYPED_PRESETS[args.preset], overwrite=args.overwrite,
                              progress=cli.progress(args))
        return
    cfg = replace(PRESETS[args.preset], **{k: v for k, v in given.items() if v is not None})
    try:
        cfg.validate()  # the config's errors name its fields; say the flags
    except DatasetError as e:
        raise _in_flags(e, {field: f"--{flag}" for flag, (field, _, _) in SYNTH_FLAGS.items()}) from e
    if args.threads is not None and args.threads < 1:
        raise DatasetError(f"--threads must be >= 1 (got {args.threads})")
    write_synthetic(args.out, cfg, overwrite=args.overwrite, progress=cli.progress(args), threads=args.threads)


def _ogb(args):
    from fastsample.data.ogb import load_ogb
    from fastsample.data.ogb_hetero import is_hetero, load_ogb_hetero

    try:
        if is_hetero(args.root):  # ogbn-mag's layout: a typed dataset
            return load_ogb_hetero(args.root, args.split, reverse=not args.directed)
        return load_ogb(args.root, args.split, symmetric=not args.directed)
    except DatasetError as e:
        if "split=" not in str(e):
            raise
        raise DatasetError(str(e).replace("split=", "--split ")) from e  # "split='x'" -> "--split 'x'"


def _igb(args) -> None:
    from fastsample.data.igb import load_igb

    try:
        layout = load_igb(args.root, args.size, args.labels, args.validation_frac, args.test_rest, args.seed)
    except DatasetError as e:
        raise _in_flags(e, {"validation_frac": "--validation-frac"}) from e
    layout.write(args.out, name=f"igbh-{args.size}", overwrite=args.overwrite, progress=cli.progress(args),
                 feature_dtype=args.feature_dtype, reverse_relations=True,
                 source={"loader": "igb", "root": str(args.root), "processed": str(layout.folder), "size": args.size,
                         "labels": args.labels, "labelled_papers": layout.labelled, "seed": args.seed,
                         "validation_frac": args.validation_frac, "test": "rest" if args.test_rest else "none"})


def _is_ogb_link(root) -> bool:
    from fastsample.data.ogb_link import is_link

    return is_link(root)


def _ogb_link(args) -> None:
    """OGB's link layout (ogbl-*): the training graph and features, and the edge split."""
    from fastsample.data.ogb_link import load_ogb_link

    try:
        ds, split = load_ogb_link(args.root, args.split, symmetric=not args.directed)
    except DatasetError as e:
        raise DatasetError(str(e).replace("split=", "--split ")) from e
    write_dataset(args.out, ds.graph, ds.features, ds.labels, ds.train, ds.val, ds.test,
                  name=str(args.root).rstrip("/").split("/")[-1], num_classes=1, overwrite=args.overwrite,
                  arrays={f"link/{k}": v for k, v in split.arrays().items()}, link=split.meta,
                  source={"loader": "ogb-link", "root": str(args.root), "split": args.split},
                  symmetric=not args.directed, self_loops=False, inputs=(args.root,))


def _link_split(args) -> None:
    from fastsample.data.edge_splits import make_edge_split

    ds = load_dataset(args.dataset)
    if ds.meta.get("link"):  # its held-out edges already left the topology: a second split holds out of the rest
        raise DatasetError(f"{args.dataset}: already a link-split dataset (its link/ holds {ds.meta['link']['edges']} "
                           "edges); split the dataset it was made from")
    relation = tuple(args.relation.replace(":", ",").split(",")) if args.relation else None
    if relation is not None and len(relation) != 3:
        raise DatasetError(f"--relation: {args.relation}: expected SRC:REL:DST (e.g. author:rev_written_by:paper)")
    try:
        topology, split = make_edge_split(ds.graph, args.val_fraction, args.test_fraction, args.seed, args.negatives,
                                          relation=relation)
    except DatasetError as e:
        raise _in_flags(e, {"val_fraction": "--val-fraction", "test_fraction": "--test-fraction",
                            "negatives": "--negatives", "relation": "--relation"}) from e
    write_dataset(args.out, topology, ds.features, ds.labels, ds.train, ds.val, ds.test, name=f"{ds.name}-link",
                  num_classes=ds.num_classes, target_type=ds.target_type, overwrite=args.overwrite,
                  arrays={f"link/{k}": v for k, v in split.arrays().items()}, link=split.meta,
                  source={"loader": "link-split", "dataset": str(args.dataset)}, inputs=(args.dataset,), **carried(ds))


def _targets(args) -> None:
    from fastsample.data.targets import derive_targets

    try:
        fractions = tuple(float(f) for f in args.fractions.split(","))
    except ValueError:
        raise DatasetError(f"--fractions: {args.fractions}: expected TRAIN,VAL,TEST shares, e.g. 0.8,0.1,0.1") from None
    relation = tuple(args.relation.replace(",", ":").split(":")) if args.relation else None
    try:
        derive_targets(load_dataset(args.dataset), args.out, args.task, relation=relation, classes=args.classes,
                       fractions=fractions, seed=args.seed, overwrite=args.overwrite)
    except DatasetError as e:
        raise _in_flags(e, {"relation": "--relation", "classes": "--classes", "fractions": "--fractions",
                            "target": "--task"}) from e


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        if args.command == "synth":
            _synth(args)
        elif args.command == "planetoid":
            from fastsample.data.planetoid import load_planetoid

            load_planetoid(args.raw_dir, args.name).write(
                args.out, name=args.name.lower(), overwrite=args.overwrite,
                source={"loader": "planetoid", "raw_dir": str(args.raw_dir)}, symmetric=True, self_loops=False)
        elif args.command == "ogb" and _is_ogb_link(args.root):
            _ogb_link(args)
        elif args.command == "ogb":
            from fastsample.data.ogb import OgbNpz

            dataset = _ogb(args)  # the npz layout streams for minutes: it shows progress
            bars = {"progress": cli.progress(args)} if isinstance(dataset, OgbNpz) else {}
            # a typed graph's reverse relations are edge types of their own: as a whole it
            # is not stored "symmetric" (the partitioner then builds its own adjacency)
            shape = ({"reverse_relations": not args.directed} if getattr(dataset, "typed", False)
                     else {"symmetric": not args.directed, "self_loops": False})
            dataset.write(
                args.out, name=str(args.root).rstrip("/").split("/")[-1], overwrite=args.overwrite,
                source={"loader": "ogb", "root": str(args.root), "split": args.split}, **shape, **bars)
        elif args.command == "igb":
            _igb(args)
        elif args.command == "link-split":
            _link_split(args)
        elif args.command == "targets":
            _targets(args)
        elif args.command == "tables":
            from fastsample.data.tables import build_tables

            build_tables(args.spec, args.out, on_unknown=args.on_unknown, overwrite=args.overwrite,
                         progress=cli.progress(args), transforms_from=args.transforms_from)
        path = args.dataset if args.command == "info" else args.out
        from fastsample.data.summary import check_features, format_check, format_summary, summarize

        ds = load_dataset(path)
        summary = summarize(ds)
        if "link" in ds.meta:  # read and checked as training will (ids of their types, nothing held out leaks)
            from fastsample.data.edge_splits import load_edge_split

            split = load_edge_split(path, ds.graph.num_nodes, ds.meta["link"], graph=ds.graph)
            summary["link"] = {"relation": ":".join(ds.meta["link"]["relation"]) if ds.graph.num_edge_types > 1
                               else None, "negatives": int(split.val_neg.shape[1]),
                               "edges": {k: len(getattr(split, k)) for k in ("train", "val", "test")}}
        if "edge_labels" in ds.meta:  # read and checked as training will
            from fastsample.data.edge_labels import load_edge_labels

            labelled = load_edge_labels(path, ds.graph.num_nodes, ds.meta["edge_labels"], graph=ds.graph)
            summary["edge_labels"] = {**{k: labelled.meta[k] for k in ("kind", "num_classes")},
                                      "relation": ":".join(labelled.meta["relation"]) if ds.graph.num_edge_types > 1
                                      else None, "edges": {k: len(v) for k, v in labelled.edges.items()}}
        if getattr(args, "check", False):
            summary["check"] = check_features(ds)
    except (DatasetError, ValueError, FileExistsError, FileNotFoundError, DiskFull, NotWritable) as e:
        return fail(f"python -m fastsample.data {args.command}", e)
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    text = format_summary(summary) + ("\n" + format_check(summary["check"]) if "check" in summary else "")
    status = report(summary, text, args.json)
    return 1 if any(v["rows"] for v in summary.get("check", {}).values()) else status


if __name__ == "__main__":
    sys.exit(main())
