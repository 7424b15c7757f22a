"""Reading the tables record batch by record batch (pyarrow), and the id maps: each node
type's ids, in table order, as dense ids 0..n-1, and the lookup of edges' ids into them.

Integer ids are looked up by binary search over their sorted copy; string ids by a 64-bit
FNV-1a hash of their bytes (Numba), binary search over the sorted hashes, and a comparison
of the bytes, so that an id missing from the table is never taken for one that hashes
alike. The state is O(nodes): the ids (or their bytes), their hashes and the sort order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from fastsample.data.table_spec import Source, TableError

__all__ = ["batches", "one_type", "IdMap", "string_arrays", "fnv1a"]

BATCH_BYTES = 64 << 20  # a record batch's decoded size, about: wide feature rows come in fewer at once


def batches(source: Source, columns: list[str], what: str, ids: tuple = (), text: tuple = ()):
    """(file, first row of the batch in that file, {column: pyarrow Array}) for every record
    batch of ``source``'s files, reading only ``columns``; a missing column, or one its header
    names twice, is a TableError naming the file, the column and ``what`` wanted it. ``ids``
    and ``text``: columns of ids and of names (categories, class names), which a CSV file
    gives as written (text: "007" stays "007", and every file alike), an empty cell as null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    as_written = tuple(dict.fromkeys((*ids, *text)))

    for file in source.files:
        try:
            if source.format == "parquet":
                import pyarrow.parquet as pq

                reader = pq.ParquetFile(file)
                names = reader.schema_arrow.names
                _check_columns(file, names, columns, what)
                meta = reader.metadata
                wanted = [names.index(c) for c in dict.fromkeys(columns)]
                row_bytes = sum(meta.row_group(g).column(i).total_uncompressed_size for g in range(meta.num_row_groups)
                                for i in wanted) / max(meta.num_rows, 1)
                stream = reader.iter_batches(batch_size=max(1024, int(BATCH_BYTES / max(row_bytes, 1))),
                                             columns=list(dict.fromkeys(columns)))
            else:
                import pyarrow.csv as pcsv

                as_text = pcsv.ConvertOptions(column_types=dict.fromkeys(as_written, pa.string()))
                stream = pcsv.open_csv(file, parse_options=pcsv.ParseOptions(delimiter=source.separator),
                                       read_options=pcsv.ReadOptions(block_size=64 << 20), convert_options=as_text)
                _check_columns(file, stream.schema.names, columns, what)
            empty_is_null = as_written if source.format != "parquet" else ()
            row = 0
            for batch in stream:
                cols = {c: batch.column(batch.schema.get_field_index(c)) for c in dict.fromkeys(columns)}
                for c in empty_is_null:  # a CSV's empty cell: no value, as in a number column
                    if c in cols:
                        cols[c] = pc.if_else(pc.equal(cols[c], ""), pa.scalar(None, cols[c].type), cols[c])
                yield file, row, cols
                row += batch.num_rows
                del batch
            pa.default_memory_pool().release_unused()  # arrow's pool keeps what it freed otherwise
        except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
            raise TableError(f"{file}: unreadable as {source.format} ({str(e).splitlines()[0]})") from None


def one_type(chunks: list, files: list, column: str) -> list:
    """One column's batches (``files``: each one's file) cast to one type, as a table of many
    files needs: a batch of nulls alone (a CSV file whose column is empty) takes the others'
    type, integers of any width become int64 (and with floats, float64), strings and
    dictionaries of them large strings; other mixes are a TableError naming two files."""
    import pyarrow as pa

    def kind(t):
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_integer(t):
            return "int"
        if pa.types.is_floating(t):
            return "float"
        return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)

    present = [(c, f) for c, f in zip(chunks, files) if not pa.types.is_null(c.type)]
    if len({c.type for c, _ in present}) <= 1 and len(present) == len(chunks):
        return chunks  # one type already (the usual case: nothing is copied)
    kinds = {kind(c.type) for c, _ in present}
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1:
        (a, fa), (b, fb) = present[0], next((c, f) for c, f in present if kind(c.type) != kind(present[0][0].type))
        raise TableError(f"{fb}: column {column!r} holds {b.type}, but {fa} holds {a.type}: give the column one "
                         "type in every file")
    target = {"int": pa.int64(), "float": pa.float64(), "string": pa.large_string()}.get(
        next(iter(kinds), None), present[0][0].type if present else pa.null())
    out = []
    for c, f in zip(chunks, files):
        try:
            out.append(c.cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:  # e.g. uint64 past int64's range beside int64
            raise TableError(f"{f}: column {column!r}: {c.type} does not convert to the {target} of its other files "
                             f"({str(e).splitlines()[0]})") from None
    return out


def _check_columns(file, names, columns, what) -> None:
    for c in columns:
        if c not in names:
            raise TableError(f"{file}: no column {c!r} ({what}; its columns: {', '.join(names)})")
        if names.count(c) > 1:  # which one is meant cannot be told (arrow's lookup gives neither)
            raise TableError(f"{file}: column {c!r} appears {names.count(c)} times in its header ({what}); name each "
                             "column once")


def string_arrays(values) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64 (n + 1,), bytes uint8) of a pyarrow string array (no nulls)."""
    import pyarrow as pa

    values = values.cast(pa.large_string()) if not pa.types.is_large_string(values.type) else values
    values = pa.concat_arrays([values]) if values.offset else values  # offsets from 0
    _, offsets, data = values.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64, count=len(values) + 1)
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, data


@numba.njit(cache=True, nogil=True)
def _fnv1a(offsets, data, out):
    for i in range(len(out)):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h


def fnv1a(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The 64-bit FNV-1a hash of each string (string_arrays' form), as uint64."""
    out = np.empty(len(offsets) - 1, dtype=np.uint64)
    _fnv1a(offsets, data, out)
    return out


@numba.njit(cache=True, nogil=True)
def _same_bytes(a_off, a_data, rows, b_off, b_data, out):
    """out[i]: string rows[i] of a equals string i of b (rows[i] < 0: no candidate)."""
    for i in range(len(rows)):
        r = rows[i]
        if r < 0:
            out[i] = False
            continue
        n = a_off[r + 1] - a_off[r]
        if n != b_off[i + 1] - b_off[i]:
            out[i] = False
            continue
        same = True
        for k in range(n):
            if a_data[a_off[r] + k] != b_data[b_off[i] + k]:
                same = False
                break
        out[i] = same


@dataclass
class IdMap:
    """One node type's ids (see the module doc): ``lookup`` gives dense ids, -1 where unknown.

    kind: "int" or "string"; keys: the ids (int64) or their hashes (uint64), in table order;
    order: the argsort of keys; strings: the ids' (offsets, bytes), for kind "string";
    column: the pyarrow array of the ids, as written to the id map file."""

    kind: str
    keys: np.ndarray
    order: np.ndarray
    strings: tuple | None
    column: object

    @property
    def size(self) -> int:
        return len(self.keys)

    @classmethod
    def build(cls, chunks: list, where: list, name: str) -> "IdMap":
        """The map of the ids in ``chunks`` (pyarrow arrays, in order); ``where``: (file,
        first row, length) of each chunk, to name a duplicate's rows; ``name``: the column."""
        import pyarrow as pa

        chunks = one_type(chunks, [w[0] for w in where], name)
        column = pa.chunked_array(chunks).combine_chunks() if chunks else pa.array([], pa.int64())
        if pa.types.is_integer(column.type):
            past = _past_int64(column)
            if len(past):
                file, row = _row(where, int(past[0]))
                raise TableError(f"{file}: column {name!r}, row {row}: id {_text(column, int(past[0]))} is past "
                                 "2^63-1: give such ids as strings")
            kind, keys, strings = "int", column.to_numpy().astype(np.int64), None
        else:
            try:
                strings = string_arrays(column)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:  # bytes that are not UTF-8 text, ...
                raise TableError(f"{where[0][0] if where else '?'}: column {name!r}: ids of type {column.type} that "
                                 f"are not text ({str(e).splitlines()[0]}): give ids as strings or integers") from None
            kind, keys = "string", fnv1a(*strings)
        order = np.argsort(keys, kind="stable")
        same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        if len(same):
            a, b = sorted((int(order[same[0]]), int(order[same[0] + 1])))
            file, row = _row(where, b)
            at = f"{file}: column {name!r}, row {row}"
            if kind == "string" and not _equal(strings, a, b):
                raise TableError(f"{at}: ids {_text(column, a)!r} and {_text(column, b)!r} hash alike (64-bit "
                                 "FNV-1a); rename one")
            first = "row {1}".format(*_row(where, a)) if _row(where, a)[0] == file else "{0}: row {1}".format(
                *_row(where, a))
            raise TableError(f"{at}: duplicate node id {_text(column, b)!r} (first at {first}; {len(same):,} "
                             f"duplicate{'s' * (len(same) > 1)} in all)")
        return cls(kind, keys, order, strings, column)

    def __post_init__(self):
        self.sorted_keys = self.keys[self.order]
        # integer ids spanning at most 4x their count: a direct table of dense ids (int32 where they fit)
        self.direct, self.low = None, 0
        if self.kind == "int" and self.size and int(self.sorted_keys[-1]) - int(self.sorted_keys[0]) < 4 * self.size:
            self.low = int(self.sorted_keys[0])
            self.direct = np.full(int(self.sorted_keys[-1]) - self.low + 1, -1,
                                  dtype=np.int32 if self.size < 2**31 else np.int64)
            self.direct[self.keys - self.low] = np.arange(self.size)

    def lookup(self, values) -> np.ndarray:
        """Dense ids (int64) of the pyarrow array ``values`` (no nulls), -1 where unknown."""
        dense = self._lookup(values)
        dense[_past_int64(values)] = -1  # unsigned ids past int64's range: not the signed ids of their bits
        return dense

    def _lookup(self, values) -> np.ndarray:
        import pyarrow as pa

        integer = pa.types.is_integer(values.type)
        if (self.kind == "int") != integer:
            raise TypeError(f"ids of type {values.type} against a node table's {self.column.type} ids")
        if integer:
            keys = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            if self.direct is not None:  # dense integer ids: one table read per id
                at = keys - self.low
                inside = (at >= 0) & (at < len(self.direct))
                return np.where(inside, self.direct[np.where(inside, at, 0)], -1).astype(np.int64)
        else:
            offsets, data = string_arrays(values)
            keys = fnv1a(offsets, data)
        sorted_keys = self.sorted_keys
        at = np.minimum(np.searchsorted(sorted_keys, keys), max(self.size - 1, 0))
        dense = self.order[at].astype(np.int64) if self.size else np.full(len(keys), -1, np.int64)
        found = (sorted_keys[at] == keys) if self.size else np.zeros(len(keys), bool)
        if not integer and self.size:  # the hash matched: so must the bytes
            same = np.empty(len(keys), dtype=np.bool_)
            _same_bytes(self.strings[0], self.strings[1], np.where(found, dense, -1), offsets, data, same)
            found &= same
        dense[~found] = -1
        return dense


def _past_int64(values) -> np.ndarray:
    """Rows of a uint64 array past 2^63-1 (none for any other type)."""
    import pyarrow as pa

    if not pa.types.is_uint64(values.type):
        return np.zeros(0, np.int64)
    return np.flatnonzero(values.to_numpy(zero_copy_only=False) > np.uint64(2**63 - 1))


def _equal(strings, a: int, b: int) -> bool:
    off, data = strings
    return bytes(data[off[a]:off[a + 1]]) == bytes(data[off[b]:off[b + 1]])


def _text(column, i: int) -> str:
    return str(column[i].as_py())


def _row(where: list, i: int) -> tuple:
    """(file, row) of the i-th id over the chunks."""
    for file, first, length in where:
        if i < length:
            return file, first + i
        i -= length
    return "?", i


def parquet_rows(file) -> int:
    """A Parquet file's row count from its footer; a TableError naming the file where it is
    not Parquet or cut short."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(file).metadata.num_rows
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
        raise TableError(f"{file}: unreadable as parquet ({str(e).splitlines()[0]})") from None


_NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$|^\s*[-+]?(inf|infinity|nan)\s*$"


def first_not_number(values) -> int | None:
    """The first row of a text column (a CSV column arrow read as text: one of its cells is no
    number) whose cell is not a number, or None."""
    import pyarrow.compute as pc

    ok = pc.match_substring_regex(values, _NUMBER, ignore_case=True).fill_null(True)
    bad = np.flatnonzero(~np.asarray(ok))
    return int(bad[0]) if len(bad) else None
