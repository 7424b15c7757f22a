"""python -m fastsample.infer: every node's output from a trained checkpoint, exactly.

Runs exact layer-wise inference (all neighbours, fastsample/loading/layerwise.py) of the model a
checkpoint of python -m fastsample.train holds, on the same ranks as training (a
partition for P ranks, launched on P ranks), and writes OUT atomically. It computes as the
checkpoint's run did, so the rows are those of the trainer's full evaluation: the features
read at its --precision (int8 quantized, bf16 narrowed), the products on its engines (bf16
products where it chose them).

What is written (--output; the default is the task's):
    logits         node classification's default: the target type's class logits
    probabilities  their softmax
    predictions    node regression's default: the target type's predicted values
    embeddings     link and edge tasks' default (their encoder's output, --hidden wide, every
                   node type's); for a node task its last hidden layer's rows
and for which node types (--node-types: all, or a comma-separated list; the default: the
target type for logits, probabilities and predictions, every type for embeddings; a type no
relation leads into gets no messages, so no embeddings: it is left out, and said so).

--format parquet: OUT/TYPE/part-R.parquet per node type and rank, with a column "id" (the
user's ids where the dataset was built from tables, python -m fastsample.data tables: its
id maps; else the node's id within its type) and a column named by the output (a
fixed-size list of float32 per row); any Parquet reader reads OUT/TYPE/ as one table.

--format npy (the default): OUT/part-R.npy (float32, rows owned by rank R) where only the
target type is written, else OUT/TYPE/part-R.npy; row k of rank R's file is the node with
partition id ranges[R][0] + k (index.json's "ranges", per type), OUT/orig_ids.npy maps
partition ids to the dataset's.

OUT/index.json says what is where: num_parts, the output and task, per node type its
files, ranges and width, the checkpoint, partition and model. A link or edge task's head
(its scorer's or classifier's parameters) is OUT/head.npz, its formula in index.json's
"head" (fastsample/export.py's HEADS): e.g. the MLP scorer's mlp.0.weight, mlp.0.bias,
mlp.2.weight, mlp.2.bias, DistMult's relation; examples/retrieve.py scores with them.

Featureless types start from the embedding shards saved beside the checkpoint
(epoch-N.embed-R-of-P.pt), so the job has as many ranks as the training had.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastsample import cli
from fastsample import options as cfg
from fastsample.choices import COMM_BACKENDS
from fastsample.comm.watchdog import stall_option
from fastsample.data.graph import NODE, unreached_types
from fastsample.options import ConfigError

PROG = "python -m fastsample.infer"
OUTPUTS = ("logits", "probabilities", "predictions", "embeddings")


@dataclass(frozen=True)
class InferConfig:
    """The settings of python -m fastsample.infer (its command line is generated from them)."""

    data: str = cfg.option(help="partition directory the model was trained on (or any partition of the same "
                           "graph, for as many ranks as this job has, where no node type is featureless: learnt "
                           "embeddings are kept by partition row; another graph: --other-data); for one process, a "
                           "dataset directory also serves, as for python -m fastsample.train")
    checkpoint: str = cfg.option(help="a checkpoint file of python -m fastsample.train (CHECKPOINT_DIR/epoch-N.pt)")
    out: str = cfg.option(help="directory to write (atomically)", shared=False)
    batch_size: int = cfg.option(4096, "nodes per rank per batch", check=(lambda v: v > 0, "must be positive"))
    output: str | None = cfg.option(None, "what to write: logits, probabilities (node classification), predictions "
                                    "(node regression), embeddings (the encoder's rows: a link or edge task's; a "
                                    "node task's last hidden layer); default: the task's (logits, predictions, "
                                    "embeddings)", choices=OUTPUTS)
    node_types: str | None = cfg.option(None, "all, or comma-separated node types to write (default: the target "
                                        "type; every type for embeddings)", metavar="all|TYPE,TYPE")
    format: str = cfg.option("npy", "npy (float32 rows per rank; ids through orig_ids.npy) or parquet (per node type "
                             "and rank: an id column, the user's ids for a dataset built from tables, and the rows)",
                             choices=("npy", "parquet"))
    backend: str = cfg.option("mpi", "collectives", choices=COMM_BACKENDS)
    stall_timeout: float | None = stall_option()
    threads: int | None = cfg.option(None, "threads per rank (default: OMP_NUM_THREADS, else this node's cores shared among its "
                                     "ranks)", shared=False,
                                     check=(lambda v: v > 0, "must be positive"))
    overwrite: bool = cfg.option(False, "replace an earlier export (or another output of fastsample, or an empty "
                                 "directory) at --out; anything else is refused")
    other_data: bool = cfg.option(False, "apply the checkpoint's model to a graph other than the one it trained on "
                                  "(inductive inference: the same node and edge types and feature widths, no "
                                  "featureless type); without it, other data is refused, naming what differs")
    progress: str | None = cfg.option(None, cli.PROGRESS_HELP, choices=("bar", "lines", "none"), shared=False)
    progress_every: float = cfg.option(60.0, cli.PROGRESS_EVERY_HELP, metavar="SECONDS", shared=False,
                                       check=(lambda v: v > 0, "must be positive"))
    quiet: bool = cfg.option(False, "no progress (--progress none)", shared=False)

    def __post_init__(self):
        cfg.validate(self)


def build_parser() -> cli.Parser:
    return cli.parser(InferConfig, PROG, __doc__)


def main(argv=None) -> int:
    parser = build_parser()
    args = cli.parse(InferConfig, parser, argv)
    cli.settle_threads(PROG, args.threads)
    from fastsample import phases
    from fastsample.comm.watchdog import watched

    comm = cli.create_comm(PROG, args.backend)
    if comm is None:
        return 2
    phases.reset()
    with watched(comm, args.stall_timeout, PROG) as comm:
        return _infer(args, comm)


def _infer(args, comm) -> int:
    # after parsing, so that a bad flag is refused before torch loads (~5 s on a busy node)
    import torch

    from fastsample import faults
    from fastsample.atomic import AtomicDirectory, as_disk_full, check_space
    from fastsample.comm.agree import ALIKE_S
    from fastsample.export import check_permutation, id_maps, orig_ids
    from fastsample.loading.layerwise import check_layerwise, layerwise
    from fastsample.loading.loader import open_share, reduce_features
    from fastsample.nn import matmul
    from fastsample.options import from_dict
    from fastsample.partition import read_partition_meta
    from fastsample import phases
    from fastsample.phases import in_phase, phase
    from fastsample.launcher import default_threads
    from fastsample.sampling import set_num_threads
    from fastsample.tasks import task_for
    from fastsample.trainer import TrainConfig, load_checkpoint
    from fastsample.trainer.checkpoint import dataset_identity, load_shard, model_where_trained, other_dataset
    from fastsample.trainer.trainer import embeddings_for, model_for

    t0 = time.perf_counter()

    @in_phase("read")
    def build():
        threads = args.threads or default_threads()  # every pool alike (see the trainer's)
        set_num_threads(threads)  # checks the count before torch's pool takes it
        torch.set_num_threads(threads)
        # a vanilla-only partition holds each rank's own rows' in-edges: enough (inference.all_in_edges)
        data = Path(args.data)
        vanilla = (data / "partition.json").is_file() and read_partition_meta(data)["mode"] == "vanilla"
        part = open_share(data, comm, "vanilla" if vanilla else "hybrid")
        ids = orig_ids(part, data)  # written beside the rows at the end: checked now
        if comm.rank == 0 and (data / "partition.json").is_file():  # the rank that writes it: every id once
            check_permutation(ids, data / "orig_ids.npy")
        id_maps(part, data, unique=comm.rank == 0)  # and the user's ids the Parquet files hold
        state = load_checkpoint(Path(args.checkpoint), "cpu")
        config = model_where_trained(from_dict(TrainConfig, state["config"]), state, args.checkpoint)
        model = model_for(config, part)
        there, here = state.get("dataset") or {}, dataset_identity(part.meta)
        fits = (there.get("transforms"), here.get("transforms"))  # None: not from tables, or before they were kept
        if None not in fits and fits[0] != fits[1]:
            # tables transformed with their own statistics or vocabulary: the same numbers mean other things
            # (and a new category widens the rows: said so here, not as a model that does not fit)
            raise ValueError(f"{args.checkpoint}: {args.data}'s features were fitted on its own tables "
                             "(standardize's mean and scale, to_categorical's vocabulary), not as those the model "
                             "trained on: build it with python -m fastsample.data tables SPEC OUT --transforms-from "
                             "THE_TRAINING_DATASET")
        try:  # first: a checkpoint of another graph's model is said so, not as a shard it lacks
            model.load_state_dict(state["model"])
        except RuntimeError as e:  # torch lists every key: its first line says enough
            raise ValueError(f"{args.checkpoint}: its model ({config.model}, trained on {config.data}) does not fit "
                             f"{args.data}'s types and widths ({str(e).splitlines()[0].rstrip(':')})") from None
        other = other_dataset(state.get("dataset"), here)  # it fits: is it its data?
        if other and not args.other_data:
            raise ValueError(f"{args.checkpoint}: trained on other data than {args.data} ({other}); pass "
                             "--other-data to apply its model to this graph (inductive inference)")
        tables = embeddings_for(config, part, comm.rank, comm.size)  # featureless types' rows, as trained
        if tables is not None:
            tokens = state.get("shards")  # which save's shards are this checkpoint's (None: an older checkpoint)
            load_shard(args.checkpoint, tables, comm.rank, comm.size,
                       token=tokens[comm.rank] if tokens and len(tokens) == comm.size else None)
        check_layerwise(model)
        inputs = tables.shards() if tables is not None else None
        # what was built, beside what was asked for (--model sage builds the R-GCN on typed data)
        built = type(model).__name__ + (f"({type(model.encoder).__name__})" if hasattr(model, "encoder") else "")
        # what the logits' columns are: the classes of the data the model trained on
        classes = there.get("class_names") or (part.meta.get("tables") or {}).get("class_names")
        return (part, model, inputs, (config.model, built), task_for(config), config.precision, state.get("products"),
                classes)

    part, model, inputs, (model_spec, built), task, precision, products, classes = cli.agreed(comm, PROG, build)
    # the products as the run computed them (its engines; bf16 products where it chose them), so
    # that the rows are those of the trainer's full evaluation; fp32 for an older checkpoint
    matmul.use(matmul.from_saved(products))
    # the features as the model was trained on them (its --precision, as the trainer's full
    # evaluation read them): int8 quantized with the scales every rank shares (collective, so
    # once every rank has read its share), bf16 narrowed; a quarter or half of fp32's memory
    part = cli.agreed(comm, PROG, in_phase("read")(lambda: reduce_features(part, precision, comm)))
    plan = cli.agreed(comm, PROG, in_phase("read")(lambda: _plan(args, task, part, model)))
    types, layers, width = plan["types"], plan["layers"], plan["width"]
    names = list(part.node_type_names)
    T, runs = len(names), part.type_runs
    rows = {t: [(int(runs[r * T + names.index(t)]), int(runs[r * T + names.index(t) + 1])) for r in range(comm.size)]
            for t in types}
    total = sum(hi - lo for ranges in rows.values() for lo, hi in ranges)
    flat = args.format == "npy" and types == [names[part.target_index]]  # the layout before node types were chosen

    # only once every rank is ready, so that no failure elsewhere leaves it behind
    def target():
        if comm.rank != 0:
            return None
        # after a killed run's temporary is gone (AtomicDirectory removes it), whose space counts:
        # the whole output, before hours of inference: float32 rows of the model's width
        target = AtomicDirectory(args.out, overwrite=args.overwrite, inputs=(args.data, args.checkpoint))
        try:
            need = total * width * 4 + part.num_nodes * 8 + (1 << 20)
            check_space(Path(args.out).parent, need, Path(args.out).name)
        except BaseException:
            target.__exit__(None, None, None)
            raise
        return target

    out = cli.agreed(comm, PROG, in_phase("startup")(target))
    tmp = Path(comm.broadcast_object(str(out.tmp) if out else None))
    # leaving the block removes the temporary directory unless it was committed
    with out if out is not None else contextlib.nullcontext():
        def compute():
            h = layerwise(model, part, comm, args.batch_size, progress=cli.progress(args), inputs=inputs,
                          every_type=plan["every_type"], layers=layers)
            return h if isinstance(h, dict) else {names[part.target_index]: h}

        # a rank failing in the pass leaves the others in one of its collectives: no long wait for them
        h = cli.agreed(comm, PROG, compute, wait_s=ALIKE_S)

        def write():
            from fastsample import export

            files = {}
            for t in types:
                rows_t = h[t] if plan["output"] != "probabilities" else _softmax(h[t])
                folder = tmp if flat else tmp / export.type_folder(part, t)
                folder.mkdir(exist_ok=True)
                file = folder / f"part-{comm.rank}.{args.format}"
                with phase("output"):
                    bad = ~np.isfinite(rows_t).all(axis=1)
                    if bad.any():  # NaN or inf rows would be exported as answers
                        first = int(rows[t][comm.rank][0]) + int(np.flatnonzero(bad)[0])
                        raise ValueError(f"{int(bad.sum()):,} of the {len(rows_t):,} {'' if t == NODE else t + ' '}"
                                         f"rows on rank {comm.rank} are not finite (the first: partition id {first}): "
                                         "the features or the checkpoint hold NaN or inf (python -m fastsample.data "
                                         "info --check DATASET finds the feature rows)")
                    try:
                        if args.format == "npy":
                            np.save(file, rows_t)
                        else:
                            export.write_rows(file, export.user_ids(part, Path(args.data), t, comm.rank), rows_t,
                                              plan["output"])
                        faults.written(file)
                    except OSError as e:  # every rank writes into the temporary directory: name the target
                        full = as_disk_full(e, Path(args.out), tmp)
                        if full is not None:
                            raise full from None
                        raise
                files[t] = str(file.relative_to(tmp))
            return files

        mine = cli.agreed(comm, PROG, write)
        with phase("output"):  # waiting for the others' files is writing the output too (a stall's line)
            files = comm.allgather_object(mine)

        def finish():  # rank 0: index, ids and head, then the commit; a failure is every rank's exit 2
            if out is None:
                return
            with phase("output"):
                try:
                    _finish(args, part, model, task, plan, rows, files, flat, tmp, model_spec, built, classes)
                except OSError as e:
                    raise (as_disk_full(e, Path(args.out), tmp) or e) from None
                out.commit()

        cli.agreed(comm, PROG, finish)
        phases.done()  # a signal from here on finds the export written
        if out is not None:
            what = " ".join(filter(None, (f"{total:,}", ", ".join(t for t in types if t != NODE), "nodes")))
            ranks = f"{comm.size} rank" + "s" * (comm.size > 1)
            print(f"{PROG}: {what} x {width} ({plan['output']}) written to {args.out} by {ranks} in "
                  f"{time.perf_counter() - t0:.1f} s" + (f"; left out {', '.join(plan['left_out'])}: no relation "
                                                         "leads into it, so no embeddings" if plan["left_out"] else ""))
    return 0


def _plan(args, task, part, model) -> dict:
    """What to write: the output, the node types, how many layers to run, the width."""
    output = args.output or task.output
    allowed = {"logits": ("logits", "probabilities", "embeddings"), "predictions": ("predictions", "embeddings"),
               "embeddings": ("embeddings",)}[task.output]
    if output not in allowed:
        raise ConfigError("output", f"{output} does not serve --task {task.name} (its outputs: {', '.join(allowed)})")
    names = list(part.node_type_names)
    target = names[part.target_index]
    hidden = output == "embeddings" and task.output != "embeddings"  # a node model's last hidden layer
    if hidden and model.num_layers < 2:
        raise ConfigError("output", "embeddings: a one-layer node model has no hidden layer")
    every = output == "embeddings"
    if args.node_types is None:
        types = names if every else [target]
    elif args.node_types == "all":
        types = names
    else:
        types = [t.strip() for t in args.node_types.split(",") if t.strip()]
        unknown = [t for t in types if t not in names]
        if unknown or not types:
            raise ConfigError("node_types", f": {', '.join(unknown) or repr(args.node_types)}: not a node type (the "
                              f"partition's: {', '.join(names)})")
        twice = sorted({t for t in types if types.count(t) > 1})
        if twice:
            raise ConfigError("node_types", f": {', '.join(twice)} named twice")
    if not every and types != [target]:
        raise ConfigError("node_types", f": {output} exist for the target type {target} only (--output "
                          "embeddings writes every type's rows)")
    # a type no relation leads into gets no messages: its rows would be the bias alone, not embeddings
    starved = set(unreached_types(part.meta))
    unreached = [t for t in types if t in starved]
    if unreached and args.node_types not in (None, "all"):
        raise ConfigError("node_types", f": {unreached[0]} is no relation's destination: the model gives its nodes "
                          "no embeddings")
    types = [t for t in types if t not in unreached]
    layers = model.num_layers - 1 if hidden else None
    width = task.config.hidden if hidden else task.out_width(task.classes(part))
    return {"output": output, "types": types, "layers": layers, "every_type": every, "width": width,
            "left_out": unreached}


def _ids_said(fmt: str, tables: bool) -> str:
    """index.json's "ids": what identifies a row, in this format."""
    if fmt == "parquet":
        return "the id column: the user's (the dataset's id maps)" if tables else \
            "the id column: dense ids within each node type"
    return "row k of rank R's file: partition id ranges[R][0] + k; orig_ids.npy maps partition ids to the " \
        "dataset's, a type's dataset ids minus its dataset_offset are its dense ids" + \
        ("; the dataset's id map of each type (node_types' id_map) has the user's id of each dense id (row k: "
         "dense id k)" if tables else "")


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _finish(args, part, model, task, plan, rows, files, flat, tmp, model_spec, built, classes) -> None:
    """Rank 0: orig_ids.npy, head.npz and index.json beside the ranks' files."""
    from fastsample.export import HEADS, head_arrays, orig_ids, type_folder

    from fastsample import faults

    maps = (part.layout["dataset"].get("tables") or {}).get("id_maps", {})  # the dataset's, relative to it
    np.save(tmp / "orig_ids.npy", orig_ids(part, Path(args.data)))
    faults.written(tmp / "orig_ids.npy")
    names = list(part.node_type_names)
    index = {"num_parts": len(files), "output": plan["output"], "format": args.format, "task": task.name,
             "offsets": [int(o) for o in part.offsets], "dtype": "float32", "orig_ids": "orig_ids.npy",
             "checkpoint": str(args.checkpoint), "partition": str(args.data), "model": model_spec,
             "architecture": built, "ids": _ids_said(args.format, "tables" in part.layout["dataset"]),
             **({"class_names": classes} if classes and plan["output"] in ("logits", "probabilities") else {}),
             "node_types": {t: {"folder": "." if flat else type_folder(part, t),
                                "files": [f[t] for f in files], "ranges": [list(r) for r in rows[t]],
                                "rows": sum(hi - lo for lo, hi in rows[t]),
                                "dataset_offset": int(part.layout["dataset"].get("node_type_offset",
                                                                                 [0] * len(names))[names.index(t)]),
                                **({"id_map": maps[t]} if t in maps else {})}
                            for t in plan["types"]}}
    if flat:  # the layout's earlier fields: one type's files at the top
        t = plan["types"][0]
        index.update(files=[f[t] for f in files], ranges=[list(r) for r in rows[t]], node_type=part.target_type)
    width = np.load(tmp / files[0][plan["types"][0]], mmap_mode="r").shape[1] if args.format == "npy" else \
        plan["width"]
    index["width"] = int(width)
    arrays = head_arrays(model)
    if arrays or hasattr(model, "encoder"):
        kind = getattr(model, "kind", "edge")
        np.savez(tmp / "head.npz", **arrays)
        index["head"] = {"file": "head.npz", "kind": kind, "formula": HEADS[kind], "arrays": sorted(arrays)}
    (tmp / "index.json").write_text(json.dumps(index, indent=2) + "\n")


if __name__ == "__main__":
    from fastsample.supervisor import supervised

    sys.exit(supervised(main, PROG))
