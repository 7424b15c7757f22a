"""Results keyed by the user's ids: what python -m fastsample.infer writes for each node type.

A rank's rows of a node type are a run of the partition's new ids; orig_ids.npy maps them
to the dataset's ids, and a node type's dataset ids are its offset plus its dense ids. A
dataset built from tables (python -m fastsample.data tables) keeps each type's id map
(id_maps/TYPE.parquet, row k: the user's id of dense id k), which the partition carries:
the id column then holds the user's ids, strings or integers as they were. Any other
dataset's id column holds the dense ids within the type (a typed dataset's ids as its
source numbers them, e.g. OGB's paper ids; untyped: the node ids).

The head's parameters (a link scorer's, an edge task's head) are saved beside the rows
(head.npz), so that the embeddings can be scored without fastsample: see HEADS.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fastsample.data.graph import NODE

__all__ = ["HEADS", "type_folder", "orig_ids", "dense_ids", "id_maps", "user_ids", "write_rows", "head_arrays"]

# How each head's arrays (head.npz) score a pair of embeddings a, b (the formulas, as the models compute them)
HEADS = {
    "dot": "score = sum(a * b)",
    "distmult": "score = sum(a * relation * b)",
    "mlp": "score = (relu((a * b) @ mlp.0.weight.T + mlp.0.bias) @ mlp.2.weight.T + mlp.2.bias)[0]",
    "edge": "out = relu(concat(a, b, a * b) @ mlp.0.weight.T + mlp.0.bias) @ mlp.2.weight.T + mlp.2.bias "
            "(edge classes' logits, or the value)",
}


def type_folder(part, node_type: str) -> str:
    """The folder a node type's files go to: its name (untyped data: its table's type name,
    or "nodes")."""
    if node_type != NODE:
        return node_type
    maps = part.layout["dataset"].get("tables", {}).get("id_maps", {})
    return Path(maps[NODE]).stem if NODE in maps else "nodes"


def orig_ids(part, data: Path) -> np.ndarray:
    """Partition ids -> the dataset's: a partition's orig_ids.npy (a ValueError naming it where
    it is unreadable or not one id per node); a dataset directory (one process) keeps its own."""
    file = Path(data) / "orig_ids.npy"
    if not (Path(data) / "partition.json").is_file():
        return np.arange(part.num_nodes, dtype=np.int64)
    try:
        ids = np.load(file, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise ValueError(f"{file}: unreadable ({e})") from None
    if ids.shape != (part.num_nodes,) or ids.dtype.kind not in "iu":
        raise ValueError(f"{file}: {ids.dtype} {ids.shape}, expected one integer id per node ({part.num_nodes:,})")
    return ids


def check_permutation(ids: np.ndarray, file: Path, chunk: int = 1 << 24) -> None:
    """A ValueError naming ``file`` unless ``ids`` holds each of 0..n-1 once: checked by range
    and by the sums of the ids and of their squares modulo 2^64 (a permutation's are known; any
    one id changed, repeated or out of range changes them), in chunks: no n-sized memory."""
    n = len(ids)
    s1 = s2 = 0
    lo, hi = 0, n - 1
    with np.errstate(over="ignore"):
        for a in range(0, n, chunk):
            block = np.asarray(ids[a:a + chunk])
            lo, hi = min(lo, int(block.min())), max(hi, int(block.max()))
            block = block.astype(np.uint64)
            s1 = (s1 + int(block.sum(dtype=np.uint64))) % 2**64
            s2 = (s2 + int((block * block).sum(dtype=np.uint64))) % 2**64
    if lo < 0 or hi >= n:
        raise ValueError(f"{file}: ids span [{lo}, {hi}], not the node ids 0..{n - 1}: partition the dataset again")
    if s1 != (n * (n - 1) // 2) % 2**64 or s2 != ((n - 1) * n * (2 * n - 1) // 6) % 2**64:
        raise ValueError(f"{file}: not a permutation of the node ids 0..{n - 1} (an id repeated, another missing): "
                         "partition the dataset again")


def dense_ids(part, partition: Path, node_type: str, rank: int) -> np.ndarray:
    """The dense ids (within the type) of ``rank``'s rows of ``node_type``, in row order."""
    names = list(part.node_type_names)
    t, T = names.index(node_type), len(names)
    runs = part.type_runs
    orig = orig_ids(part, partition)
    rows = np.asarray(orig[int(runs[rank * T + t]):int(runs[rank * T + t + 1])], dtype=np.int64)
    offsets = part.layout["dataset"].get("node_type_offset", [0])
    return rows - int(offsets[t])


def user_ids(part, partition: Path, node_type: str, rank: int):
    """The id column of ``rank``'s rows of ``node_type`` (a pyarrow array): the user's ids where
    the dataset came from tables, else the dense ids (see the module doc). The maps are
    id_maps' to check, once, before the work that leads here."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dense = dense_ids(part, partition, node_type, rank)
    maps = part.layout["dataset"].get("tables", {}).get("id_maps", {})
    if node_type not in maps:
        return pa.array(dense)
    return pq.read_table(Path(partition) / maps[node_type], columns=["id"]).column("id").take(pa.array(dense))


def id_maps(part, partition: Path, unique: bool = False) -> None:
    """Check that each of the partition's id maps (a dataset built from tables) is there and
    has one id per node of its type (``unique``: its ids read and each told apart, an O(n)
    pass: for the one rank that writes them): a ValueError naming the file (before hours of
    inference, not when the rows are written)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    maps = part.layout["dataset"].get("tables", {}).get("id_maps", {})
    names = list(part.node_type_names)
    offsets = list(part.layout["dataset"].get("node_type_offset", [0])) + [part.num_nodes]
    for t, rel in maps.items():
        file = Path(partition) / rel
        if not file.is_file():
            raise ValueError(f"{file}: missing; the partition of a dataset built from tables carries its id maps "
                             "(partition it again)")
        try:
            rows = pq.read_metadata(file).num_rows
        except Exception as e:  # pyarrow's errors for a file that is not Parquet (or cut short) vary
            raise ValueError(f"{file}: unreadable ({type(e).__name__}: {e})") from None
        i = names.index(t) if t in names else None
        count = offsets[i + 1] - offsets[i] if i is not None else None
        if count is not None and rows != count:
            raise ValueError(f"{file}: {rows:,} ids, expected one per {t} node ({count:,}); partition the dataset "
                             "again")
        if not unique:
            continue
        try:
            column = pq.read_table(file, columns=["id"]).column("id")
        except Exception as e:  # no id column: found here, not after the inference
            raise ValueError(f"{file}: no readable id column ({type(e).__name__}: {str(e).splitlines()[0]})") from None
        if pc.count_distinct(column, mode="all").as_py() != rows:
            raise ValueError(f"{file}: an id repeated: each {t} node needs its own (the rows would share it); "
                             "build the dataset from its tables again")


def write_rows(file: Path, ids, rows: np.ndarray, column: str) -> None:
    """A Parquet file of ``ids`` (column "id") and ``rows`` (column ``column``, a fixed-size
    list of float32 per row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = np.ascontiguousarray(rows, dtype=np.float32)
    values = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), rows.shape[1])
    pq.write_table(pa.table({"id": ids, column: values}), file)


def head_arrays(model) -> dict:
    """{name: float32 array} of the model's parameters outside its encoder (a link scorer's,
    an edge head's); empty for a model without a head (a node model, the dot scorer)."""
    return {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()
            if not k.startswith("encoder.") and hasattr(model, "encoder")}
