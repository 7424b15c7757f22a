"""The feature transforms of the tables spec (fastsample/data/table_spec.py's TRANSFORMS):
each turns a column's record batches into float32 rows of a fixed width.

A transform sees the table twice: ``fit`` on every batch first where it ``needs_fit`` (the
statistics or the vocabulary of standardize and to_categorical), then ``apply`` on every batch,
in the same order, giving its (rows, width) block. Nulls are filled first with the
feature's ``fill``, or refused naming the row; a column of a type the transform cannot
take is refused naming its type.
"""

from __future__ import annotations

import numpy as np

from fastsample.data.table_io import first_not_number, fnv1a, string_arrays
from fastsample.data.table_spec import Feature, TableError

__all__ = ["transform_for"]


def transform_for(feature: Feature):
    """The transform object of one feature of the spec."""
    return {"none": Numbers, "standardize": Numbers, "to_categorical": Categories, "hash": Hashed,
            "bag": Bag}[feature.transform](feature)


class _Transform:
    needs_fit = False  # whether fit must see the table first (statistics, a vocabulary)

    def __init__(self, feature: Feature):
        self.feature, self.width = feature, None

    def state(self) -> dict | None:
        """What fit learned, as JSON (meta.json keeps it: a later snapshot's tables are
        transformed with it, data tables --transforms-from); None: nothing is fitted."""
        return None

    def load(self, state: dict) -> None:
        """Take ``state`` (an earlier build's) instead of fitting."""
        self.needs_fit = False

    def fit(self, values, at) -> None:
        """See a batch before any is applied (``at``: (file, first row) for messages)."""

    def finish(self) -> None:
        """After the last fit."""

    def filled(self, values, at):
        """``values`` with nulls filled by the feature's fill; a TableError naming the first
        null's row where it has none."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not values.null_count:
            return values
        if self.feature.fill is None:
            first = int(np.flatnonzero(np.asarray(values.is_null()))[0])
            raise TableError(f"{at[0]}: column {self.feature.column!r}, row {at[1] + first}: null, and the feature "
                             f"declares no fill ({values.null_count:,} nulls in this batch)")
        if pa.types.is_null(values.type):  # a file whose column is all empty (CSV): the fill's own type
            return pa.repeat(pa.scalar(self.feature.fill), len(values))
        try:
            return pc.fill_null(values, pa.scalar(self.feature.fill).cast(values.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise TableError(f"{at[0]}: column {self.feature.column!r}: fill {self.feature.fill!r} does not fit its "
                             f"type {values.type}") from None

    def refuse(self, values, at, wants: str):
        raise TableError(f"{at[0]}: column {self.feature.column!r}: type {values.type}, but transform "
                         f"{self.feature.transform} takes {wants}")


class Numbers(_Transform):
    """none and standardize: a number, or a list of them, per row."""

    def __init__(self, feature: Feature):
        super().__init__(feature)
        self.needs_fit = feature.transform == "standardize"

    def matrix(self, values, at) -> np.ndarray:
        import pyarrow as pa

        values = self.filled(values, at)
        kind = values.type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            out = values.to_numpy(zero_copy_only=False).reshape(-1, 1)
        elif (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)) and (
                pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)):
            lengths = np.asarray(values.value_lengths().fill_null(-1))
            width = lengths[0] if len(lengths) else (self.width or 0)
            bad = np.flatnonzero(lengths != width)
            if len(bad):
                raise TableError(f"{at[0]}: column {self.feature.column!r}, row {at[1] + bad[0]}: a list of "
                                 f"{lengths[bad[0]]} numbers{' (null)' if lengths[bad[0]] < 0 else ''}, the rows "
                                 f"before it {width}")
            flat = values.flatten()
            if flat.null_count:
                raise TableError(f"{at[0]}: column {self.feature.column!r}: a list holds a null number")
            out = flat.to_numpy(zero_copy_only=False).reshape(len(values), width)
        else:
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # a CSV column with a cell of text
                row = first_not_number(values)
                if row is not None:
                    raise TableError(f"{at[0]}: column {self.feature.column!r}, row {at[1] + row}: "
                                     f"{values[row].as_py()!r} is not a number (transform "
                                     f"{self.feature.transform} takes numbers)")
            self.refuse(values, at, "numbers or lists of numbers")
        if out.shape[1] == 0:
            raise TableError(f"{at[0]}: column {self.feature.column!r}: lists of 0 numbers; a feature needs a value")
        if out.dtype.kind == "f" and not np.isfinite(out).all():
            row = int(np.flatnonzero(~np.isfinite(out).all(1))[0])
            raise TableError(f"{at[0]}: column {self.feature.column!r}, row {at[1] + row}: "
                             f"{out[row][~np.isfinite(out[row])][0]}, not a finite number (a missing value is a "
                             "null, with the feature's fill)")
        if self.width is not None and out.shape[1] != self.width:
            raise TableError(f"{at[0]}: column {self.feature.column!r}, row {at[1]}: lists of {out.shape[1]} numbers, "
                             f"earlier rows {self.width}")
        self.width = out.shape[1]
        return out

    def fit(self, values, at) -> None:
        x = self.matrix(values, at)
        if self.feature.transform == "standardize" and len(x):
            # each batch's mean and squared deviations, merged (Chan et al.): E[x^2] - E[x]^2 loses
            # every digit of a spread small beside the values (timestamps, ids: 1e10 + k)
            x = x.astype(np.float64)
            n, m, mean = getattr(self, "n", 0), len(x), x.mean(0)
            with np.errstate(over="ignore"):  # an overflow is refused in finish, by column
                m2 = ((x - mean) ** 2).sum(0)
            if n:
                delta = mean - self.mean
                with np.errstate(over="ignore"):
                    mean, m2 = self.mean + delta * m / (n + m), self.m2 + m2 + delta ** 2 * n * m / (n + m)
            self.n, self.mean, self.m2 = n + m, mean, m2

    def finish(self) -> None:
        if self.feature.transform == "standardize" and getattr(self, "n", 0):
            std = np.sqrt(self.m2 / self.n)
            if not np.isfinite(std).all():  # 1e200's squares: every value would come out 0
                raise TableError(f"column {self.feature.column!r}: values too large to standardize (their spread "
                                 "overflows float64); scale them first")
            self.scale = np.where(std > 0, 1 / np.where(std > 0, std, 1), 0)

    def state(self) -> dict | None:
        if self.feature.transform != "standardize" or not hasattr(self, "scale"):
            return None
        return {"mean": np.atleast_1d(self.mean).tolist(), "scale": np.atleast_1d(self.scale).tolist()}

    def load(self, state: dict) -> None:
        super().load(state)
        self.mean, self.scale = np.asarray(state["mean"], np.float64), np.asarray(state["scale"], np.float64)
        self.width = len(self.mean)

    def apply(self, values, at) -> np.ndarray:
        x = self.matrix(values, at)
        if self.feature.transform == "standardize":
            return ((x.astype(np.float64) - self.mean) * self.scale).astype(np.float32)
        return x.astype(np.float32, copy=False)


def _category_strings(transform: _Transform, values, at):
    """A categorical column's values as strings (integers in their decimal form)."""
    import pyarrow as pa

    values = transform.filled(values, at)
    if pa.types.is_integer(values.type) or pa.types.is_boolean(values.type):
        return values.cast(pa.large_string())
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return values
    if pa.types.is_dictionary(values.type):
        return values.cast(pa.large_string())
    transform.refuse(values, at, "strings or integers")


def _tokens(transform: _Transform, values, at, separator: str | None):
    """(row of each token, the tokens as a string array) of a list-of-strings column, or of a
    string column split at ``separator`` (None: one token per row, as it is); empty tokens
    are none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        values = transform.filled(values, at)
        if not (pa.types.is_string(values.type.value_type) or pa.types.is_large_string(values.type.value_type)):
            transform.refuse(values, at, "strings or lists of strings")
    else:
        values = _category_strings(transform, values, at)
        if separator is None:
            return np.arange(len(values)), values
        values = pc.split_pattern(values, separator)
    rows, tokens = np.asarray(pc.list_parent_indices(values)), pc.list_flatten(values)
    if tokens.null_count:
        tokens = tokens.fill_null("")
    keep = np.asarray(pc.greater(pc.binary_length(tokens), 0))  # "a||b" and "" hold no empty token
    return rows[keep], tokens.filter(pa.array(keep))


class Categories(_Transform):
    """to_categorical: one-hot (multi-hot with a separator) over the sorted distinct values."""

    needs_fit = True

    def fit(self, values, at) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        # integers are ordered as numbers (2, 10, 100), not as their decimal strings
        self.numbers = getattr(self, "numbers", True) and pa.types.is_integer(values.type)
        _, tokens = _tokens(self, values, at, self.feature.options.get("separator"))
        self.seen = getattr(self, "seen", set()) | set(pc.unique(tokens).to_pylist())

    def finish(self) -> None:
        import pyarrow as pa

        if self.needs_fit:
            seen = getattr(self, "seen", set())
            order = sorted(seen, key=int) if getattr(self, "numbers", False) else sorted(seen)
            self.vocabulary = pa.array(order, pa.large_string())
        self.width = len(self.vocabulary)

    def state(self) -> dict | None:
        return {"vocabulary": self.vocabulary.to_pylist()} if hasattr(self, "vocabulary") else None

    def load(self, state: dict) -> None:
        import pyarrow as pa

        super().load(state)
        self.vocabulary = pa.array(state["vocabulary"], pa.large_string())
        self.width = len(self.vocabulary)

    def apply(self, values, at) -> np.ndarray:
        import pyarrow.compute as pc

        rows, tokens = _tokens(self, values, at, self.feature.options.get("separator"))
        index = pc.index_in(tokens, value_set=self.vocabulary)  # every value fitted, unless loaded
        if index.null_count:  # not in an earlier build's vocabulary (load): no category set
            known = np.asarray(index.is_valid())
            self.unseen = getattr(self, "unseen", 0) + int((~known).sum())
            self.first_unseen = getattr(self, "first_unseen", None) or tokens.filter(index.is_null())[0].as_py()
            rows, index = rows[known], index.filter(index.is_valid())
        out = np.zeros((len(values), self.width), dtype=np.float32)
        out[rows, np.asarray(index)] = 1
        return out


class Bag(_Transform):
    """bag: counts of a row's tokens hashed into ``buckets`` columns."""

    def __init__(self, feature: Feature):
        super().__init__(feature)
        self.width = int(feature.options.get("buckets", 64))
        self.separator = feature.options.get("separator", " ")

    def apply(self, values, at) -> np.ndarray:
        rows, tokens = _tokens(self, values, at, self.separator)
        bucket = (fnv1a(*string_arrays(tokens)) % np.uint64(self.width)).astype(np.int64)
        counts = np.bincount(rows * self.width + bucket, minlength=len(values) * self.width)
        return counts.reshape(len(values), self.width).astype(np.float32)


class Hashed(Bag):
    """hash: a category's one-hot among ``buckets`` hashed columns (a bag of one token)."""

    def __init__(self, feature: Feature):
        super().__init__(feature)
        self.separator = None
