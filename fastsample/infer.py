"""python -m fastsample.infer: every node's output from a trained checkpoint, exactly.

Runs exact layer-wise inference (all neighbours, fastsample/loading/layerwise.py) of the model a
checkpoint of python -m fastsample.train holds, on the same ranks as training (a
partition for P ranks, launched on P ranks), and writes OUT atomically:

    OUT/part-R.npy    float32 (rows owned by rank R, output width): row k is node offsets[R] + k
    OUT/orig_ids.npy  the partition's map from its node ids to the dataset's
    OUT/index.json    num_parts, offsets, width, files, the checkpoint and partition used

Typed data (the R-GCN): the outputs are the target type's nodes only, so part-R.npy's
row k is node ranges[R][0] + k (index.json's "ranges" [lo, hi) per rank, and "node_type");
featureless types start from the embedding shards saved beside the checkpoint
(epoch-N.embed-R-of-P.pt), so the job has as many ranks as the training had.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fastsample import cli
from fastsample import options as cfg
from fastsample.choices import COMM_BACKENDS

PROG = "python -m fastsample.infer"


@dataclass(frozen=True)
class InferConfig:
    """The settings of python -m fastsample.infer (its command line is generated from them)."""

    data: str = cfg.option(help="partition directory the model was trained on (or any partition of the same "
                           "graph, for as many ranks as this job has)")
    checkpoint: str = cfg.option(help="a checkpoint file of python -m fastsample.train (CHECKPOINT_DIR/epoch-N.pt)")
    out: str = cfg.option(help="directory to write (atomically)", shared=False)
    batch_size: int = cfg.option(4096, "nodes per rank per batch", check=(lambda v: v > 0, "must be positive"))
    backend: str = cfg.option("mpi", "collectives", choices=COMM_BACKENDS)
    threads: int | None = cfg.option(None, "threads per rank (default: OMP_NUM_THREADS or all cores)", shared=False,
                                     check=(lambda v: v > 0, "must be positive"))
    overwrite: bool = cfg.option(False, "replace an existing --out directory")
    quiet: bool = cfg.option(False, "no progress bar (drawn only on a terminal anyway)", shared=False)

    def __post_init__(self):
        cfg.validate(self)


def build_parser() -> cli.Parser:
    return cli.parser(InferConfig, PROG, __doc__)


def main(argv=None) -> int:
    parser = build_parser()
    args = cli.parse(InferConfig, parser, argv)
    cli.settle_threads(PROG, args.threads)
    # after parsing, so that a bad flag is refused before torch loads (~5 s on a busy node)
    import numpy as np
    import torch

    from fastsample.atomic import AtomicDirectory, check_space
    from fastsample.loading.layerwise import check_layerwise, layerwise
    from fastsample.options import from_dict
    from fastsample.partition import load_partition, read_partition_meta
    from fastsample.sampling import set_num_threads
    from fastsample.tasks import task_for
    from fastsample.trainer import TrainConfig, load_checkpoint
    from fastsample.trainer.checkpoint import load_shard
    from fastsample.trainer.trainer import embeddings_for, model_for

    comm = cli.create_comm(PROG, args.backend)
    if comm is None:
        return 2
    t0 = time.perf_counter()

    def build():
        if args.threads:
            torch.set_num_threads(args.threads)
            set_num_threads(args.threads)
        # a vanilla-only partition holds each rank's own rows' in-edges: enough (inference.all_in_edges)
        layout = "vanilla" if read_partition_meta(args.data)["mode"] == "vanilla" else "hybrid"
        part = load_partition(args.data, comm.rank, comm.size, mode=layout)
        state = load_checkpoint(Path(args.checkpoint), "cpu")
        config = from_dict(TrainConfig, state["config"])
        model = model_for(config, part)
        tables = embeddings_for(config, part, comm.rank, comm.size)  # featureless types' rows, as trained
        if tables is not None:
            tokens = state.get("shards")  # which save's shards are this checkpoint's (None: an older checkpoint)
            load_shard(args.checkpoint, tables, comm.rank, comm.size,
                       token=tokens[comm.rank] if tokens and len(tokens) == comm.size else None)
        model.load_state_dict(state["model"])
        check_layerwise(model)
        inputs = tables.shards() if tables is not None else None
        # what was built, beside what was asked for (--model sage builds the R-GCN on typed data)
        built = type(model).__name__ + (f"({type(model.encoder).__name__})" if hasattr(model, "encoder") else "")
        return part, model, inputs, (config.model, built), task_for(config)

    part, model, inputs, (model_spec, built), task = cli.agreed(comm, PROG, build)
    out_width = task.out_width(task.classes(part))
    rows = _output_rows(part, comm.size)
    total = sum(hi - lo for lo, hi in rows)
    # only once every rank is ready, so that no failure elsewhere leaves it behind
    def target():
        if comm.rank != 0:
            return None
        # the whole output, before hours of inference: float32 rows of the model's width
        need = total * out_width * 4 + part.num_nodes * 8 + (1 << 20)
        check_space(Path(args.out).parent, need, Path(args.out).name)
        return AtomicDirectory(args.out, overwrite=args.overwrite)

    out = cli.agreed(comm, PROG, target)
    tmp = Path(comm.broadcast_object(str(out.tmp) if out else None))
    # leaving the block removes the temporary directory unless it was committed
    with out if out is not None else contextlib.nullcontext():
        def write():
            h = layerwise(model, part, comm, args.batch_size, progress=not args.quiet, inputs=inputs)
            np.save(tmp / f"part-{comm.rank}.npy", h)
            return h.shape[1]

        width = cli.agreed(comm, PROG, write)
        if out is not None:
            shutil.copyfile(Path(args.data) / "orig_ids.npy", tmp / "orig_ids.npy")
            index = {"num_parts": comm.size, "offsets": [int(o) for o in part.offsets], "width": int(width),
                     "dtype": "float32", "files": [f"part-{r}.npy" for r in range(comm.size)],
                     "orig_ids": "orig_ids.npy", "checkpoint": str(args.checkpoint), "partition": str(args.data),
                     "model": model_spec, "architecture": built, "task": task.name, "output": task.output,
                     # the target type's rows (untyped: every node): a range of ids per rank
                     "node_type": part.target_type, "ranges": [list(r) for r in rows]}
            (tmp / "index.json").write_text(json.dumps(index, indent=2) + "\n")
            out.commit()
            what = " ".join(filter(None, (f"{total:,}", part.target_type, "nodes")))  # untyped: no type to name
            print(f"{PROG}: {what} x {width} written to {args.out} by {comm.size} ranks in "
                  f"{time.perf_counter() - t0:.1f} s")
    return 0


def _output_rows(part, num_parts: int) -> list[tuple[int, int]]:
    """Each rank's output rows as [lo, hi) node ids: its nodes of the target type
    (layerwise's rows; untyped data: all of its nodes)."""
    runs, T, t = part.type_runs, len(part.node_type_names), part.target_index
    return [(int(runs[r * T + t]), int(runs[r * T + t + 1])) for r in range(num_parts)]


if __name__ == "__main__":
    sys.exit(main())
