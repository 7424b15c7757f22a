"""Top-k retrieval from a link model's exported embeddings, without fastsample: numpy and pyarrow.

    python -m fastsample.infer --data PARTITION --checkpoint CK/epoch-N.pt --out EXPORT --format parquet
    python examples/retrieve.py EXPORT --relation author:rev_written_by:paper --source author-42 --k 10
    python examples/retrieve.py EXPORT --check DATASET      # the test MRR, from EXPORT's files

EXPORT holds every node type's embeddings keyed by the user's ids (EXPORT/TYPE/*.parquet:
columns "id" and "embeddings") and the trained scorer's parameters (EXPORT/head.npz, its
formula in EXPORT/index.json's "head"). A query scores the source's embedding against every
node of the relation's destination type and prints the k best with their scores.

--check DATASET ranks each of the link-split dataset's test edges against its fixed
negatives (link/test.npy, link/test_neg.npy, in the dataset's ids, keyed through its id maps
as the export is) and prints the MRR, which is the test MRR python -m fastsample.train
reports for the checkpoint's epoch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


class Export:
    """An export's embeddings per node type and its scorer."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.index = json.loads((self.folder / "index.json").read_text())
        if self.index.get("format", "parquet") != "parquet":  # npy rows carry partition ids, not the user's
            sys.exit(f"{folder}: an export in {self.index.get('format')}; retrieve reads a Parquet one, keyed by your "
                     "ids (python -m fastsample.infer ... --format parquet)")
        head = self.index.get("head")
        if head is None or head["kind"] not in ("dot", "distmult", "mlp"):
            sys.exit(f"{folder}: no link scorer (index.json's head: {head}); export a --task link checkpoint")
        self.kind = head["kind"]
        self.head = dict(np.load(self.folder / head["file"]))
        self.types = {}

    def nodes(self, node_type: str) -> tuple:
        """(ids as a pyarrow array, embeddings (n, dim) float32) of a node type."""
        if node_type not in self.types:
            info = self.index["node_types"].get(node_type)
            if info is None:
                sys.exit(f"{self.folder}: no node type {node_type!r} (it has {', '.join(self.index['node_types'])})")
            table = pq.read_table(self.folder / info["folder"])
            rows = table.column(self.index["output"]).combine_chunks()
            self.types[node_type] = (table.column("id").combine_chunks(),
                                     np.asarray(rows.flatten(), dtype=np.float32).reshape(len(rows), -1))
        return self.types[node_type]

    def rows(self, node_type: str, ids) -> np.ndarray:
        """The embeddings of ``ids`` (a pyarrow array) of ``node_type``."""
        known, h = self.nodes(node_type)
        at = pc.index_in(ids, value_set=known)
        if at.null_count:
            sys.exit(f"{node_type} id {ids[int(np.flatnonzero(np.asarray(at.is_null()))[0])]} is not in the export")
        return h[np.asarray(at)]

    def score(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The scorer's logits of the pairs (a[..., :], b[..., :]) (index.json's head formula)."""
        p = self.head
        if self.kind == "dot":
            return (a * b).sum(-1)
        if self.kind == "distmult":
            return (a * p["relation"] * b).sum(-1)
        z = np.maximum((a * b) @ p["mlp.0.weight"].T + p["mlp.0.bias"], 0)
        return (z @ p["mlp.2.weight"].T + p["mlp.2.bias"])[..., 0]


def top_k(export: Export, relation: tuple, source, k: int) -> list[tuple]:
    """The k destinations of ``relation`` scored highest for ``source`` (a user id): [(id, score)]."""
    src_type, _, dst_type = relation
    a = export.rows(src_type, pa.array([source]))[0]
    ids, h = export.nodes(dst_type)
    scores = export.score(a[None, :], h)
    best = np.argsort(-scores, kind="stable")[:k]
    return [(ids[int(i)].as_py(), float(scores[i])) for i in best]


def test_mrr(export: Export, dataset) -> float:
    """The MRR of the dataset's test edges against their fixed negatives, scored from the export."""
    dataset = Path(dataset)
    meta = json.loads((dataset / "meta.json").read_text())
    link = meta.get("link")
    if link is None:
        sys.exit(f"{dataset}: not a link-split dataset")
    types = meta.get("node_types", ["_N"])
    offsets = meta.get("node_type_offset", [0, meta["num_nodes"]])
    relation = link.get("relation", ["_N", "_E", "_N"])
    maps = meta.get("tables", {}).get("id_maps", {})

    def user(ids: np.ndarray, node_type: str):
        dense = ids - offsets[types.index(node_type)]
        if node_type not in maps:
            return pa.array(dense)
        return pq.read_table(dataset / maps[node_type]).column("id").take(pa.array(dense.ravel()))

    edges = np.load(dataset / "link" / "test.npy").astype(np.int64)
    negs = np.load(dataset / "link" / "test_neg.npy").astype(np.int64)
    a = export.rows(relation[0], user(edges[:, 0], relation[0]))
    b = export.rows(relation[2], user(edges[:, 1], relation[2]))
    n = export.rows(relation[2], user(negs.ravel(), relation[2])).reshape(len(negs), negs.shape[1], -1)
    pos, neg = export.score(a, b)[:, None], export.score(a[:, None, :], n)
    rank = 1 + 0.5 * ((neg > pos).sum(1) + (neg >= pos).sum(1))  # ties: the mean of both ranks, as OGB's
    return float(np.mean(1.0 / rank))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("export", help="python -m fastsample.infer's --out of a link checkpoint, --format parquet")
    p.add_argument("--relation", metavar="SRC:REL:DST", help="the relation to retrieve along (untyped: omit)")
    p.add_argument("--source", help="the source node's id, as the tables had it")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--check", metavar="DATASET", help="print the test MRR over DATASET's link split")
    args = p.parse_args(argv)
    export = Export(args.export)
    if args.check:
        print(f"test mrr {test_mrr(export, args.check):.6f}")
    if args.source is not None:
        relation = tuple(args.relation.split(":")) if args.relation else ("_N", "_E", "_N")
        source = int(args.source) if export.nodes(relation[0])[0].type != pa.string() else args.source
        for rank, (node, score) in enumerate(top_k(export, relation, source, args.k), 1):
            print(f"{rank:3d}  {node}  {score:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
