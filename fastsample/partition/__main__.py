"""python -m fastsample.partition: partition a dataset for P ranks and report its quality."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from fastsample import cli
from fastsample import options as cfg
from fastsample.choices import PARTITION_METHODS, PARTITION_MODES
from fastsample.atomic import DiskFull, NotWritable, format_bytes
from fastsample.data.graph import NODE, DatasetError, read_meta
from fastsample.partition.layout import PartitionError, partition_dataset

EPILOG = """\
examples:
  python -m fastsample.partition data/products data/products-4 --parts 4
  python -m fastsample.partition data/products data/products-4r --parts 4 --method random
  python -m fastsample.partition data/g8m data/g8m-4 --parts 4 --method kaminpar

The balance, for every method (an untyped graph is one node type): every part holds
floor(n/P) or floor(n/P)+1 of each split (train, val, test) of each node type, so all
ranks run the same number of steps; each node type at most 5% over its mean per part;
in-edges at most 5% over the mean (or the mean plus the largest in-degree, where one
node outweighs 5%). METIS and KaMinPar cut the graph balancing one weight, in-degree +
1 (a constraint per node type leaves METIS's types far over their mean); the
nodes still over a cap then move, those adding the fewest cut edges first, and a boundary
refinement (moves, and swaps of two nodes of one group) recovers cut within every cap
(fastsample/partition/balance.py). The report gives the partitioner's own cut next to
the cut after balancing, and max/mean per node type. Node ids are renumbered so each
part owns one contiguous range; orig_ids.npy maps new ids back to the dataset's.
"""


@dataclass(frozen=True)
class PartitionConfig:
    """The settings of python -m fastsample.partition (its command line is generated from them)."""

    dataset: str = cfg.option(help="dataset directory (python -m fastsample.data ...)", positional=True)
    out: str = cfg.option(help="partition directory to write", positional=True)
    parts: int = cfg.option(help="number of ranks (P), at most the node count")
    method: str = cfg.option("auto", "metis; kaminpar (pip install 'fastsample[kaminpar]': for graphs METIS cannot "
                             "hold in memory); random; auto: METIS where its estimated peak memory fits, else "
                             "KaMinPar (it says which and why)", choices=PARTITION_METHODS)
    mode: str = cfg.option("both", "hybrid: topology replicated; vanilla: topology partitioned; both",
                           choices=PARTITION_MODES)
    seed: int = cfg.option(0, "seed of METIS / the random assignment")
    overwrite: bool = cfg.option(False, "replace an earlier output of fastsample (a dataset, partition or export) "
                                 "or an empty directory there; anything else is refused")
    progress: str | None = cfg.option(None, cli.PROGRESS_HELP, choices=("bar", "lines", "none"))
    progress_every: float = cfg.option(60.0, cli.PROGRESS_EVERY_HELP, metavar="SECONDS",
                                       check=(lambda v: v > 0, "must be positive"))
    quiet: bool = cfg.option(False, "no progress output (--progress none, and no stage lines)")
    json: bool = cfg.option(False, "print partition.json instead of the report")

    def __post_init__(self):
        cfg.validate(self)


def format_report(meta: dict) -> str:
    """partition.json's contents as the report the CLI prints."""
    b = meta["balance"]
    parts = meta["parts"]
    types = {k: v for k, v in meta["type_balance"].items() if k != NODE}  # the one-type case's name is internal
    moved = meta["moved_for_balance"]
    lines = [
        f"partition   {meta['dataset']['name']} into {meta['num_parts']} parts by {meta['method']} "
        f"(mode {meta['mode']})",
        f"edge cut    {meta['edge_cut']:,} of {meta['dataset']['num_edges']:,} edges "
        f"({meta['edge_cut_fraction']:.1%}; {meta['method']}'s own before balancing "
        f"{meta['partitioner_edge_cut_fraction']:.1%})",
        "balance     max/mean  " + "  ".join(f"{k} {v:.3f}" for k, v in b.items())
        + f"  (splits floor or floor+1 per part; types and in-edges within {meta['balance_tolerance']:.0%})",
        *(["types       max/mean  " + "  ".join(f"{k} {v:.3f}" for k, v in types.items())] if types else []),
        f"moved       {moved['balance']:,} nodes to balance"
        + (f"; refined by {moved['refine_moves']:,} moves and {moved['refine_swaps']:,} swaps"
           if "refine_moves" in moved else ""),
        f"topology    hybrid {format_bytes(meta['hybrid_topology_bytes'])} on every rank; vanilla per rank "
        + ", ".join(format_bytes(p["vanilla_topology_bytes"]) for p in parts),
        "features    per rank " + ", ".join(format_bytes(p["feature_bytes"]) for p in parts),
        f"{'part':>6} {'nodes':>11} {'edges':>13} {'train':>8} {'val':>8} {'test':>9}",
    ]
    lines += [f"{k:>6} {p['nodes']:>11,} {p['edges']:>13,} {p['train']:>8,} {p['val']:>8,} {p['test']:>9,}"
              for k, p in enumerate(parts)]
    return "\n".join(lines)


def main(argv=None) -> int:
    """The command line (``python -m fastsample.partition``, ``fastsample-partition``).

    Args:
        argv: the arguments (default: sys.argv[1:]).
    Returns:
        The exit status: 0, or 2 after a one-line error (argparse exits 2 itself).
    """
    prog = "python -m fastsample.partition"
    p = cli.parser(PartitionConfig, prog, __doc__.split(":", 1)[1].strip(), EPILOG)
    args = cli.parse(PartitionConfig, p, argv)
    try:
        num_nodes = read_meta(args.dataset)["num_nodes"]
        if not 1 <= args.parts <= num_nodes:  # the flag's words (the library names the parameter)
            raise PartitionError(f"--parts must be in 1..{num_nodes} (the node count), got {args.parts}")
        meta = partition_dataset(args.dataset, args.out, args.parts, args.method, args.mode, args.seed,
                                 overwrite=args.overwrite, progress=cli.progress(args))
    except (DatasetError, PartitionError, ValueError, FileExistsError, DiskFull, NotWritable) as e:
        return cli.fail(prog, e)
    return cli.report(meta, format_report(meta), args.json)


if __name__ == "__main__":
    sys.exit(main())
