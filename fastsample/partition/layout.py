"""The partitioned layout on disk: writing it, and loading one rank's share of it.

    OUT/partition.json       num_parts, method, mode, offsets, edge cut, balance, bytes
    OUT/orig_ids.npy         (num_nodes,) original id of each new id (maps results back)
    OUT/id_maps/             a dataset from tables: its id maps (fastsample/data/tables.py)
    OUT/topology/            hybrid: the whole relabelled in-edge CSC (indptr, indices),
                             replicated: every rank memory-maps the same files
    OUT/part-K/              rank K's shard, rows offsets[K]..offsets[K+1]:
        features.npy, labels.npy         the owned nodes' rows, in new-id order
        train.npy, val.npy, test.npy     owned split nodes (new global ids)
        indptr.npy, indices.npy          vanilla: in-edges of the owned nodes (indptr local
                                         to the range, indices global new ids)
        link/*.npy                       a link-split dataset's edges (fastsample/data/edge_splits.py)
                                         whose destination the part owns, in new ids
        edge_labels/*.npy                a dataset's labelled edges (fastsample/data/edge_labels.py),
                                         likewise

``mode`` hybrid writes topology/, vanilla writes the per-part CSCs, both writes both.

A typed dataset's partition: each part's nodes come grouped by node type (in the
dataset's type order), so each (rank, type) owns one contiguous run of new ids;
partition.json's ``type_runs`` lists the P x T + 1 run boundaries (owner, type and row in
the type's shard from that one table) and its ``dataset`` the schema. topology/ and the
vanilla parts add type_per_edge.npy (each node's in-edges still sorted by type); a part
holds features/TYPE.npy per featured type (its rows of that type) and labels.npy for its
target-type nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fastsample.allocator import available_memory
from fastsample.atomic import AtomicDirectory, allocated_memmap, check_space, format_bytes
from fastsample.choices import MODES, PARTITION_METHODS, PARTITION_MODES
from fastsample.data.edge_labels import load_edge_labels
from fastsample.data.edge_splits import load_edge_split
from fastsample.data.graph import (NODE, SPLITS, CSCGraph, Dataset, DatasetError, unwrap_one_type, describe_types,
                              expect_array, load_dataset, open_array, open_types, read_json, validate_csc)
from fastsample.progress import progress_bar
from fastsample.partition.assign import (edge_cut, is_symmetric, metis_parts, node_weights, random_parts,
                                         symmetric_adjacency, symmetric_edges)
from fastsample.partition.balance import TOLERANCE, balance, caps
from fastsample.partition.refine import refine
from fastsample.partition import kaminpar as kp
from fastsample.partition import memory
from fastsample.partition.relabel import relabel_graph_to, relabel_order

LAYOUT_VERSION = 1
_CHUNK_ROWS = 1 << 20


class PartitionError(ValueError):
    """Bad input to the partition layer: an argument out of range, or a partition directory
    that is damaged or does not fit the launch; the message names the parameter or file.
    (A dataset's own errors stay DatasetError; a part's unreadable file is wrapped in this,
    with the DatasetError as its cause.)"""


def _stage(msg: str, progress: bool, t0: float) -> None:
    if progress:
        tqdm.write(f"[{time.perf_counter() - t0:7.1f}s] {msg}")


def _resolve_method(method: str, ds, parts: int, progress: bool) -> str:
    """auto -> metis or kaminpar by memory (said when progress is on); kaminpar must be installed."""
    why = None
    if method == "auto":  # one part: nothing to partition, METIS returns at once
        method, why = memory.choose_method(ds.graph.num_nodes, _sym_edges(ds), available_memory()) if parts > 1 \
            else ("metis", None)
    if method == "kaminpar" and not kp.available():
        raise PartitionError(f"{why}, but the kaminpar package is not installed: pip install 'fastsample[kaminpar]' "
                             "(or pass method metis to try anyway)" if why else
                             "method kaminpar needs the kaminpar package: pip install 'fastsample[kaminpar]'")
    if why and progress:
        print(f"partition: method auto chose {method}: {why}", file=sys.stderr, flush=True)
    return method


def _sym_edges(ds) -> int:
    return symmetric_edges(ds.graph.num_edges, is_symmetric(ds))


@contextlib.contextmanager
def _native_stderr():
    """Hold back what native code writes to fd 2 meanwhile, yielding a list that then
    holds it: METIS prints its allocation failure there, which belongs in our one line.
    Passed on unchanged when the block ends normally."""
    sys.stderr.flush()
    saved = os.dup(2)
    text = []
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        ok = False
        try:
            yield text
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text.append(f.read().decode(errors="replace").strip())
            if ok and text[0]:
                print(text[0], file=sys.stderr, flush=True)


def _graph_parts(method: str, ds, parts: int, seed: int, scratch) -> tuple[np.ndarray, CSCGraph]:
    """METIS or KaMinPar, and the symmetric adjacency they ran on (balancing counts its gains
    on it); running out of memory is one PartitionError naming the alternative.
    scratch: a directory for the symmetrised adjacency of a directed graph."""
    try:
        with _native_stderr() as said:
            adj = symmetric_adjacency(ds, scratch)
            if method == "metis":
                return metis_parts(adj, node_weights(ds.graph.in_degrees()), parts, seed), adj
            return kp.kaminpar_parts(adj, node_weights(ds.graph.in_degrees()), parts, seed, scratch=scratch), adj
    except (MemoryError, RuntimeError) as e:  # pymetis reports its malloc failure as "unknown exception"
        n, m, sym = ds.graph.num_nodes, ds.graph.num_edges, _sym_edges(ds)
        need = (memory.metis_peak_bytes if method == "metis" else memory.kaminpar_peak_bytes)(n, sym)
        other = (f"method kaminpar (about {format_bytes(memory.kaminpar_peak_bytes(n, sym))})" if method == "metis"
                 else "a machine with more memory")
        native = said[-1].splitlines()[-1].strip("* ") if said and said[-1] else ""
        why = f"{native}; {type(e).__name__}: {e}" if native else f"{type(e).__name__}: {e}"
        raise PartitionError(f"{method} failed on {n:,} nodes and {m:,} edges ({why}); it needs about "
                             f"{format_bytes(need)}; use {other}") from None


def _type_runs(ds, orig_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(P * T + 1,) the relabelled ids' node type runs: part k's nodes of type t are
    runs[k * T + t]..runs[k * T + t + 1] - 1 (relabel_order keeps a part's nodes in
    original id order, and each type is one original id range, so they come grouped)."""
    T = len(ds.graph.node_types)
    types = ds.graph.node_type_of(orig_ids)
    runs = [0]
    for k in range(len(offsets) - 1):
        lo, hi = int(offsets[k]), int(offsets[k + 1])
        runs.extend((lo + np.cumsum(np.bincount(types[lo:hi], minlength=T))).tolist())
    return np.asarray(runs, dtype=np.int64)


def _copy_rows(path: Path, source: np.ndarray, rows: np.ndarray) -> int:
    """source[rows] (ascending) written to the .npy ``path`` in row blocks; returns its bytes."""
    out = allocated_memmap(path, source.dtype, (len(rows), source.shape[1]))
    for b in range(0, len(rows), _CHUNK_ROWS):
        out[b:b + _CHUNK_ROWS] = source[rows[b:b + _CHUNK_ROWS]]
    out.flush()
    size = out.nbytes
    del out
    return int(size)


def _write_node_data(pk: Path, ds, orig_ids: np.ndarray, runs: np.ndarray, k: int) -> int:
    """Part k's feature rows (per featured node type, the file describe_types names) and its
    target-type nodes' labels, in new-id order; returns the feature bytes."""
    g, T = ds.graph, len(ds.graph.node_types)
    specs = describe_types(ds.meta)["features"]
    size = 0
    for t, name in enumerate(g.node_types):
        a, b = int(runs[k * T + t]), int(runs[k * T + t + 1])
        local = orig_ids[a:b] - g.node_type_offset[t]  # rows of the type's own feature matrix
        if t == ds.target_index:
            np.save(pk / "labels.npy", np.asarray(ds.labels)[local])
        if specs[name] is not None:
            file = pk / f"{specs[name]['file']}.npy"
            file.parent.mkdir(exist_ok=True)
            size += _copy_rows(file, ds.shards[name], local)
    return size


def _check_space(ds, out: Path, mode: str) -> None:
    """DiskFull before any work if the output cannot fit: every node's rows once, the
    relabelled topology once per layout written, the ids and labels."""
    g = ds.graph
    rows = sum(f.nbytes for f in ds.shards.values() if f is not None)
    topology = g.indptr.nbytes + sum(a.nbytes for a in g.edge_arrays().values())
    need = rows + topology * (2 if mode == "both" else 1) + ds.labels.nbytes + g.num_nodes * 8 + (1 << 20)
    check_space(out.parent, need, out.name)


def _mkdir(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


def _edge_sets(dataset, ds) -> dict:
    """The dataset's edge split (link prediction) and labelled edges (edge tasks), read and
    checked before any partitioning work (a bad file is its error, at once):
    {name: (loaded or None, its arrays' suffixes)}."""
    split = labelled = None
    if "link" in ds.meta:
        split = load_edge_split(dataset, ds.graph.num_nodes, ds.meta["link"], graph=ds.graph)
    if "edge_labels" in ds.meta:
        labelled = load_edge_labels(dataset, ds.graph.num_nodes, ds.meta["edge_labels"], graph=ds.graph)
    return {"link": (split, ("", "_neg")), "edge_labels": (labelled, ("", "_labels"))}


def _relabelled(name: str, loaded, new_of_old: np.ndarray) -> dict | None:
    """An edge set in new ids: {split: (edges (E, 2), and the split's negatives (link) or
    labels (edge_labels))}; None without it."""
    if loaded is None:
        return None
    new = lambda a: new_of_old[np.asarray(a, dtype=np.int64)]
    if name == "link":
        return {"train": (new(loaded.train),), "val": (new(loaded.val), new(loaded.val_neg)),
                "test": (new(loaded.test), new(loaded.test_neg))}
    return {s: (new(loaded.edges[s]), np.asarray(loaded.labels[s])) for s in loaded.edges}


def partition_dataset(dataset, out, parts: int, method: str = "auto", mode: str = "both",
                      seed: int = 0, overwrite: bool = False, progress: bool = True) -> dict:
    """Partition a dataset directory for ``parts`` ranks and write the layout (atomically).

    Args:
        dataset: the dataset directory; out: the partition directory to write;
        parts: the number of ranks, 1..num_nodes; method: metis, kaminpar (the optional
        kaminpar package), random, or auto (METIS where its estimated peak memory fits,
        else KaMinPar; see partition/memory.py);
        mode: hybrid, vanilla or both (which layouts to write); seed: of METIS / the random
        assignment; overwrite: replace an existing ``out``; progress: report the stages.
    Returns:
        partition.json's contents. Bad arguments are a PartitionError naming the parameter;
        a bad dataset is the DatasetError of load_dataset.
    """
    t0 = time.perf_counter()
    if method not in PARTITION_METHODS:
        raise PartitionError(f"method must be one of {', '.join(PARTITION_METHODS)} (got {method!r})")
    if mode not in PARTITION_MODES:
        raise PartitionError(f"mode must be one of {', '.join(PARTITION_MODES)} (got {mode!r})")
    ds = load_dataset(dataset)
    n = ds.graph.num_nodes
    if not 1 <= parts <= n:
        raise PartitionError(f"parts must be in 1..{n} (the node count), got {parts}")
    edge_sets = _edge_sets(dataset, ds)
    T = len(ds.graph.node_types)
    # the target first: an existing output is refused before anything is said or chosen, and a
    # killed run's temporary is removed (AtomicDirectory) before the space check counts it
    with AtomicDirectory(out, overwrite=overwrite, inputs=(dataset,)) as target:
        _check_space(ds, Path(out), mode)
        method = _resolve_method(method, ds, parts, progress)
        _stage(f"{method}: {n:,} nodes, {ds.graph.num_edges:,} edges into {parts} parts", progress, t0)
        E = max(ds.graph.num_edges, 1)
        if method in ("metis", "kaminpar"):
            part, adj = _graph_parts(method, ds, parts, seed, target.tmp)
        else:  # the baseline: no symmetrised copy; the in-edges stand in for it when balancing picks nodes
            part, adj = random_parts(n, parts, seed), ds.graph
        before = edge_cut(ds.graph, part)
        _stage(f"{method} done: edge cut {before / E:.1%}; balancing every node type, split and the in-edges",
               progress, t0)
        limits = caps(ds, parts)
        moved = {"balance": balance(adj, ds.graph.indptr, part, limits)}
        if method != "random":  # random stays the naive baseline
            moved["refine_moves"], moved["refine_swaps"] = refine(adj, ds.graph.indptr, part, limits)
        del adj, limits
        cut = edge_cut(ds.graph, part)
        _stage(f"edge cut {cut / E:.1%}; nodes moved {moved}", progress, t0)
        orig_ids, offsets = relabel_order(part, parts)
        del part
        tmp = target.tmp
        runs = _type_runs(ds, orig_ids, offsets)
        # written in row blocks, read back memory-mapped: the relabelled topology never
        # sits in memory whole (vanilla-only layouts drop it once the parts are cut)
        (tmp / "topology").mkdir()
        graph = relabel_graph_to(ds.graph, orig_ids, tmp / "topology", type_runs=runs)
        _stage("relabelled: each part owns one contiguous id range", progress, t0)
        new_of_old = np.empty(n, dtype=np.int64)
        new_of_old[orig_ids] = np.arange(n)

        np.save(tmp / "orig_ids.npy", orig_ids.astype(ds.graph.indices.dtype))
        topo_bytes = graph.indptr.nbytes + sum(a.nbytes for a in graph.edge_arrays().values())
        split_new = {s: np.sort(new_of_old[np.asarray(getattr(ds, s))]) for s in SPLITS}
        # each edge set with the suffixes of its aligned arrays' files
        edge_sets = {k: (_relabelled(k, loaded, new_of_old), suffixes) for k, (loaded, suffixes) in edge_sets.items()}
        stats = []
        for k in progress_bar(range(parts), desc="writing parts", disable=not progress):
            lo, hi = int(offsets[k]), int(offsets[k + 1])
            pk = tmp / f"part-{k}"
            pk.mkdir()
            feature_bytes = _write_node_data(pk, ds, orig_ids, runs, k)
            counts = {}
            for s in SPLITS:
                ids = split_new[s]
                mine = ids[(ids >= lo) & (ids < hi)].astype(ds.graph.indices.dtype)
                np.save(pk / f"{s}.npy", mine)
                counts[s] = int(len(mine))
            for folder, (sets, suffixes) in edge_sets.items():  # each edge with its destination's owner
                for name, (edges, *aligned) in (sets or {}).items():
                    mine = (edges[:, 1] >= lo) & (edges[:, 1] < hi)
                    for suffix, arr in zip(suffixes, (edges, *aligned)):
                        np.save(_mkdir(pk / folder) / f"{name}{suffix}.npy", arr[mine])
                    counts[f"{folder}_{name}"] = int(mine.sum())
            e_lo, e_hi = int(graph.indptr[lo]), int(graph.indptr[hi])
            if mode in ("vanilla", "both"):
                np.save(pk / "indptr.npy", (np.asarray(graph.indptr[lo:hi + 1], np.int64) - e_lo)
                        .astype(graph.indptr.dtype))
                for name, arr in graph.edge_arrays().items():
                    np.save(pk / f"{name}.npy", arr[e_lo:e_hi])
            stats.append({"nodes": hi - lo, "edges": e_hi - e_lo, **counts,
                          "node_types": np.diff(runs[k * T:(k + 1) * T + 1]).tolist(),
                          "feature_bytes": feature_bytes,
                          "vanilla_topology_bytes": (hi - lo + 1) * graph.indptr.itemsize
                          + (e_hi - e_lo) * sum(a.itemsize for a in graph.edge_arrays().values())})

        def max_over_mean(key, t=None):
            values = np.array([st[key] if t is None else st[key][t] for st in stats], dtype=np.float64)
            return float(values.max() / values.mean()) if values.mean() else 1.0

        meta = {
            "layout_version": LAYOUT_VERSION,
            "dataset": {key: ds.meta[key] for key in ("name", "num_nodes", "num_edges", "feature_dim",
                                                      "num_classes", "dtypes", "node_types", "node_type_offset", "edge_types",
                                                      "target_type", "features", "link", "edge_labels", "tables")
                        if key in ds.meta},
            "source": str(Path(dataset).resolve()),
            "num_parts": parts, "method": method, "mode": mode, "seed": seed,
            "offsets": offsets.tolist(),
            "type_runs": runs.tolist(),
            "edge_cut": int(cut), "edge_cut_fraction": cut / E,
            "partitioner_edge_cut": int(before), "partitioner_edge_cut_fraction": before / E,
            "balance_tolerance": TOLERANCE,
            "balance": {key: max_over_mean(key) for key in ("nodes", "edges", *SPLITS)},
            "type_balance": {name: max_over_mean("node_types", t) for t, name in enumerate(ds.graph.node_types)},
            "moved_for_balance": moved,
            "hybrid_topology_bytes": int(topo_bytes),
            "parts": stats,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        if (Path(dataset) / "id_maps").is_dir():  # a dataset from tables: its outputs are keyed by the user's ids
            shutil.copytree(Path(dataset) / "id_maps", tmp / "id_maps")
        (tmp / "partition.json").write_text(json.dumps(meta, indent=2) + "\n")
        del graph
        if mode == "vanilla":
            shutil.rmtree(tmp / "topology")
        target.commit()
    _stage(f"written to {out}", progress, t0)
    return meta


# ---------------------------------------------------------------- loading


@dataclass(frozen=True, eq=False, kw_only=True)
class RankPartition(Dataset):
    """Rank ``rank``'s share of a partition: the dataset record (fastsample.data.graph.Dataset)
    with its node data cut to what the rank owns, plus where the share sits. Node ids are
    new (relabelled) global ids; ``meta`` is the dataset's meta.json, ``path`` the partition.

    graph:       hybrid: the whole relabelled topology (memory-mapped, shared); else None
    features, labels: rows of the owned nodes, in id order
    train, val, test: owned split nodes
    rank, num_parts: this share, of how many
    offsets:     (num_parts + 1,) int64; the rank owns ids offsets[rank]..offsets[rank+1]-1
    local_graph: vanilla: in-edges of the owned nodes; indptr is over the owned range
                 (local row i = global id offsets[rank] + i), indices are global; else None
    layout:      partition.json (every part's split sizes in ``layout["parts"]``)
    scales:      {node type: its columns' scales} where features are int8 in memory
                 (--precision int8: fastsample/int8.py, loading.quantize_features); else {}
    """

    rank: int
    num_parts: int
    offsets: np.ndarray
    local_graph: CSCGraph | None = None
    layout: dict = field(default_factory=dict)
    scales: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    @property
    def type_runs(self) -> np.ndarray:
        """(num_parts * T + 1,) int64: run i holds rank i // T's nodes of type i % T (the
        owner, type and row of an id come from this one table); untyped: the owned ranges."""
        return np.asarray(self.layout.get("type_runs", self.offsets), dtype=np.int64)

    def split_sizes(self, split: str) -> list[int]:
        """How many ``split`` nodes each part owns."""
        return [int(p[split]) for p in self.layout["parts"]]

    @classmethod
    def whole(cls, ds: Dataset) -> "RankPartition":
        """One process owning all of ``ds``: its graph is both the replicated and the local topology."""
        n = ds.graph.num_nodes
        layout = {"dataset": ds.meta, "num_parts": 1, "mode": "both", "offsets": [0, n],
                  "parts": [{s: len(getattr(ds, s)) for s in SPLITS}]}
        layout["type_runs"] = [int(o) for o in ds.graph.node_type_offset]  # one rank: each node type is one run
        record = {f.name: getattr(ds, f.name) for f in fields(Dataset)}
        return cls(**record, rank=0, num_parts=1, offsets=np.array([0, n], dtype=np.int64), local_graph=ds.graph,
                   layout=layout)


def read_partition_meta(path) -> dict:
    """Read and check a partition directory's ``partition.json`` (not its parts).

    Args:
        path: the partition directory.
    Returns:
        partition.json's contents. Raises PartitionError naming the file.
    """
    path = Path(path)
    file = path / "partition.json"
    if not file.is_file():
        raise PartitionError(f"{file}: missing; is {path} a partition made by python -m fastsample.partition?")
    meta = read_json(file, PartitionError)
    fields = {"layout_version": int, "num_parts": int, "mode": str, "offsets": list, "parts": list,
              "dataset": dict}
    for key, typ in fields.items():
        if not isinstance(meta.get(key), typ):
            raise PartitionError(f"{file}: field {key!r} missing or not {typ.__name__}")
    if meta["layout_version"] != LAYOUT_VERSION:
        raise PartitionError(f"{file}: layout_version {meta['layout_version']}, this fastsample reads "
                             f"{LAYOUT_VERSION}")
    P, offsets = meta["num_parts"], meta["offsets"]
    if (P < 1 or len(offsets) != P + 1 or len(meta["parts"]) != P or offsets[0] != 0
            or offsets[-1] != meta["dataset"].get("num_nodes") or any(np.diff(offsets) < 0)):
        raise PartitionError(f"{file}: num_parts, offsets and parts disagree (corrupted?)")
    if meta["mode"] not in PARTITION_MODES:
        raise PartitionError(f"{file}: unknown mode {meta['mode']!r}")
    T = len(describe_types(meta["dataset"])["node_types"])
    runs = np.asarray(meta.get("type_runs", offsets))
    if runs.shape != (P * T + 1,) or (np.diff(runs) < 0).any() or not np.array_equal(runs[::T], offsets):
        raise PartitionError(f"{file}: type_runs must be {P * T + 1} non-decreasing offsets that start "
                             "each part where offsets does (corrupted?)")
    return meta


def load_partition(path, rank: int, world_size: int, mode: str = "hybrid") -> RankPartition:
    """Open rank ``rank``'s share, checking it against partition.json and the launch.

    Args:
        path: the partition directory (python -m fastsample.partition, or partition_dataset);
        rank: this rank, 0..world_size-1; world_size: the job's rank count (must equal the
        partition's part count); mode: hybrid or vanilla (the layout to open).
    Returns:
        The RankPartition (arrays memory-mapped). Anything wrong is one PartitionError naming
        the file or parameter; an unreadable file's DatasetError is its cause.
    """
    path = Path(path)
    meta = read_partition_meta(path)
    P = meta["num_parts"]
    if world_size != P:
        raise PartitionError(f"{path / 'partition.json'}: partition built for {P} ranks, but the job has "
                             f"{world_size}; re-partition it (python -m fastsample.partition ... --parts "
                             f"{world_size}) or launch {P} ranks")
    if not 0 <= rank < P:
        raise PartitionError(f"rank {rank} outside 0..{P - 1}")
    if mode not in MODES:
        raise PartitionError(f"mode must be hybrid or vanilla (got {mode!r})")
    if meta["mode"] not in (mode, "both"):
        raise PartitionError(f"{path / 'partition.json'}: written for mode {meta['mode']!r}, not {mode!r}; "
                             f"re-partition it (python -m fastsample.partition ... --mode {mode} or both)")
    try:
        return _open_share(path, meta, rank, mode)
    except DatasetError as e:  # an unreadable or inconsistent file of the share
        raise PartitionError(f"partition {path}, rank {rank}: {e}") from e


def _open_share(path: Path, meta: dict, rank: int, mode: str) -> RankPartition:
    P = meta["num_parts"]
    d = meta["dataset"]
    offsets = np.asarray(meta["offsets"], dtype=np.int64)
    lo, hi = int(offsets[rank]), int(offsets[rank + 1])
    stats = meta["parts"][rank]
    pk = path / f"part-{rank}"
    if not pk.is_dir():
        raise PartitionError(f"{pk}: missing (partition.json lists {P} parts)")

    def expect(arr, file, shape, dtype):
        expect_array(file, arr, shape, (dtype,), source="partition.json", error=PartitionError)

    features, labels, runs = _open_rows(pk, meta, rank, expect)
    splits, seen = {}, np.zeros(hi - lo, dtype=bool)
    for s in SPLITS:
        ids = open_array(pk, s)
        expect(ids, pk / f"{s}.npy", (stats[s],), d["dtypes"]["indices"])
        if len(ids) and (ids.min() < lo or ids.max() >= hi):
            raise PartitionError(f"{pk / (s + '.npy')}: ids outside the owned range {lo}..{hi - 1}")
        if len(ids) > 1 and (np.diff(ids) <= 0).any():  # written sorted: a repeat would train a node twice
            raise PartitionError(f"{pk / (s + '.npy')}: ids not strictly increasing (a repeated id, or not as "
                                 "partition wrote them)")
        if seen[ids - lo].any():
            raise PartitionError(f"{pk / (s + '.npy')}: ids also in another split")
        seen[ids - lo] = True
        splits[s] = ids
    graph = local = None
    if mode == "hybrid":
        topo = path / "topology"
        indptr, indices = open_array(topo, "indptr"), open_array(topo, "indices")
        expect(indices, topo / "indices.npy", (d["num_edges"],), d["dtypes"]["indices"])
        if indptr.dtype.kind not in "iu":
            raise PartitionError(f"{topo / 'indptr.npy'}: dtype {indptr.dtype.name}, expected integers")
        validate_csc(indptr, indices, d["num_nodes"], where=topo)
        graph = CSCGraph(indptr, indices, open_types(topo, d, d["num_edges"], error=PartitionError), runs,
                         d.get("node_types", ()), d.get("edge_types", ()))
    else:
        indptr, indices = open_array(pk, "indptr"), open_array(pk, "indices")
        expect(indices, pk / "indices.npy", (stats["edges"],), d["dtypes"]["indices"])
        if indptr.dtype.kind not in "iu":
            raise PartitionError(f"{pk / 'indptr.npy'}: dtype {indptr.dtype.name}, expected integers")
        if len(indptr) != hi - lo + 1 or indptr[0] != 0 or indptr[-1] != stats["edges"]:
            raise PartitionError(f"{pk / 'indptr.npy'}: does not span the {hi - lo} owned nodes' "
                                 f"{stats['edges']} in-edges")
        if (np.diff(indptr) < 0).any():
            raise PartitionError(f"{pk / 'indptr.npy'}: not monotone non-decreasing")
        if stats["edges"] and (indices.min() < 0 or indices.max() >= d["num_nodes"]):
            raise PartitionError(f"{pk / 'indices.npy'}: node ids outside 0..{d['num_nodes'] - 1}")
        local = CSCGraph(indptr, indices, open_types(pk, d, stats["edges"], error=PartitionError), runs,
                         d.get("node_types", ()), d.get("edge_types", ()))
    return RankPartition(graph, unwrap_one_type(features), labels, **splits, num_classes=d["num_classes"], name=d["name"], meta=d,
                         path=path, target_type=d.get("target_type"), rank=rank, num_parts=P, offsets=offsets,
                         local_graph=local, layout=meta)


def _open_rows(pk: Path, meta: dict, rank: int, expect):
    """A share's features ({node type: its owned rows, None where featureless}), labels
    (its target-type rows) and the type runs (partition.json's; a layout written before
    they were recorded is untyped, its runs the offsets)."""
    d = meta["dataset"]
    schema = describe_types(d)
    T = len(schema["node_types"])
    runs = np.asarray(meta.get("type_runs", meta["offsets"]), dtype=np.int64)  # checked by read_partition_meta
    features = {}
    for t, (name, spec) in enumerate(schema["features"].items()):
        a, b = int(runs[rank * T + t]), int(runs[rank * T + t + 1])
        features[name] = None
        if spec is not None:
            file = pk / f"{spec['file']}.npy"
            features[name] = open_array(file.parent, file.stem)
            expect(features[name], file, (b - a, spec["dim"]), spec["dtype"])
    t = schema["node_types"].index(schema["target_type"] or NODE)
    a, b = int(runs[rank * T + t]), int(runs[rank * T + t + 1])
    labels = open_array(pk, "labels")
    expect(labels, pk / "labels.npy", (b - a,), d["dtypes"].get("labels", "int64"))
    classes = d["num_classes"]
    if labels.dtype.kind == "i" and classes and len(labels):  # a class past the model's logits fails at a step
        bad = np.flatnonzero((labels < -1) | (labels >= classes))
        if len(bad):
            raise PartitionError(f"{pk / 'labels.npy'}: row {bad[0]}: class {labels[bad[0]]} outside "
                                 f"0..{classes - 1} (-1: unlabelled)")
    return features, labels, runs
