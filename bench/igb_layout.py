"""Write a random graph in IGB's heterogeneous processed layout (IGBH's, read by
``python -m fastsample.data igb``, fastsample/data/igb.py), to measure that reader at
scale offline: uniform random edges, random float32 features of a small width, random
labels (node_label_19.npy and node_label_2K.npy). Everything is written in blocks
(sequential writes), so memory stays at a block whatever the size.

    python bench/igb_layout.py /tmp/igb --papers 4000000 --cites 20   # ~100M edge rows
    /usr/bin/time -v python -m fastsample.data igb /tmp/igb /tmp/igb-ds --size tiny --quiet
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

BLOCK = 1 << 22  # rows per block


def _write(path: Path, shape: tuple, dtype, blocks) -> None:
    """PATH (a .npy file of shape and dtype) from consecutive row blocks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                 "fortran_order": False, "shape": shape})
        rows = 0
        for block in blocks:
            np.ascontiguousarray(block, dtype=dtype).tofile(f)
            rows += len(block)
    assert rows == shape[0], (path, rows, shape)


def _chunks(n: int):
    for a in range(0, n, BLOCK):
        yield a, min(n, a + BLOCK)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="the directory to write (ROOT/SIZE/processed/ is made)")
    p.add_argument("--size", default="tiny", choices=("tiny", "small", "medium", "large", "full"),
                   help="the SIZE directory, and with large or full also journal and conference")
    p.add_argument("--papers", type=int, default=1_000_000)
    p.add_argument("--authors", type=int, default=None, help="default: 1.5 x papers")
    p.add_argument("--institutes", type=int, default=20_000)
    p.add_argument("--fos", type=int, default=100_000)
    p.add_argument("--venues", type=int, default=5_000, help="journals and conferences each (large, full)")
    p.add_argument("--cites", type=float, default=10.0, help="citation rows per paper")
    p.add_argument("--authors-per-paper", type=float, default=3.0)
    p.add_argument("--topics-per-paper", type=float, default=3.0)
    p.add_argument("--width", type=int, default=8, help="feature width of every type")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    out = Path(args.root) / args.size / "processed"
    counts = {"paper": args.papers, "author": args.authors or int(1.5 * args.papers), "institute": args.institutes,
              "fos": args.fos}
    rows = {("paper", "cites", "paper"): int(args.cites * args.papers),
            ("paper", "written_by", "author"): int(args.authors_per_paper * args.papers),
            ("author", "affiliated_to", "institute"): counts["author"],
            ("paper", "topic", "fos"): int(args.topics_per_paper * args.papers)}
    if args.size in ("large", "full"):
        counts.update(journal=args.venues, conference=args.venues)
        rows[("paper", "published", "journal")] = args.papers // 2
        rows[("paper", "venue", "conference")] = args.papers // 2
    for t, n in counts.items():
        _write(out / t / "node_feat.npy", (n, args.width), np.float32,
               (rng.standard_normal((b - a, args.width), dtype=np.float32) for a, b in _chunks(n)))
    for name, classes in (("19", 19), ("2K", 2983)):
        _write(out / "paper" / f"node_label_{name}.npy", (args.papers,), np.float32,
               (rng.integers(0, classes, b - a).astype(np.float32) for a, b in _chunks(args.papers)))
    for (s, rel, d), e in rows.items():
        _write(out / f"{s}__{rel}__{d}" / "edge_index.npy", (e, 2), np.int64,
               (np.stack([rng.integers(0, counts[s], b - a), rng.integers(0, counts[d], b - a)], axis=1)
                for a, b in _chunks(e)))
    print(f"{out}: {sum(counts.values()):,} nodes, {sum(rows.values()):,} edge rows, width {args.width}, "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
