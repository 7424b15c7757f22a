"""A small shop as Parquet tables, the way users hold their graphs: docs/datasets.md's "Your own
data" walk-through starts from it.

    python examples/shop_tables.py data/shop-tables

writes OUT/users.parquet (string ids "u00042", age with nulls, country, tags "a|b", the
segment label as names), OUT/items.parquet (integer ids, a price-and-rating vector, a
category), OUT/buys.parquet (user, item: each user buys mostly items of the category its
segment prefers) and OUT/spec.json (python -m fastsample.data tables' spec; its keys:
fastsample/data/table_spec.py). A user's segment shows in what it buys more than in its
own columns, so the graph is what a model learns it from. Seeded: the same files each time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEGMENTS = ("basic", "bronze", "silver", "gold")
COUNTRIES = ("de", "fr", "it", "nl", "se")


def write(out, users: int = 2000, items: int = 400, buys: int = 6, seed: int = 0) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    segment = rng.integers(0, len(SEGMENTS), users)
    age = np.round(30 + 3 * segment + rng.normal(0, 12, users), 1)  # a weak hint of the segment
    pq.write_table(pa.table({
        "user_id": [f"u{k:05d}" for k in range(users)],
        "age": pa.array(age, mask=rng.random(users) < 0.05),  # some ages unknown: the spec fills them
        "country": [COUNTRIES[c] for c in rng.integers(0, len(COUNTRIES), users)],
        "tags": ["|".join(rng.choice(["new", "mobile", "promo", "vip"], rng.integers(0, 3), replace=False))
                 for _ in range(users)],
        "segment": pa.array([SEGMENTS[s] for s in segment], mask=rng.random(users) < 0.1),  # some unlabelled
    }), out / "users.parquet")
    category = rng.integers(0, len(SEGMENTS), items)
    vector = np.stack([rng.gamma(2, 10 + 10 * category), rng.normal(3 + 0.3 * category, 1)], axis=1)
    pq.write_table(pa.table({
        "item_id": np.arange(1000, 1000 + items),
        "features": pa.FixedSizeListArray.from_arrays(pa.array(vector.ravel().astype(np.float32)), 2),
        "category": category,
    }), out / "items.parquet")
    user = np.repeat(np.arange(users), buys)
    liked = rng.random(len(user)) < 0.5  # half the purchases in the segment's category
    pick = np.where(liked, segment[user], rng.integers(0, len(SEGMENTS), len(user)))
    by_category = [np.flatnonzero(category == c) for c in range(len(SEGMENTS))]
    item = np.array([rng.choice(by_category[c]) for c in pick]) + 1000
    pq.write_table(pa.table({"user": [f"u{k:05d}" for k in user], "item": item}), out / "buys.parquet")
    spec = {
        "name": "shop",
        "nodes": [
            {"node_type": "user", "files": "users.parquet", "node_id_col": "user_id",
             "features": [{"feature_col": "age", "fill": 35.0, "transform": {"name": "standardize"}},
                          {"feature_col": "country", "transform": {"name": "to_categorical"}},
                          {"feature_col": "tags", "transform": {"name": "bag", "buckets": 8, "separator": "|"}}],
             "labels": [{"label_col": "segment", "task_type": "classification", "split_pct": [0.6, 0.2, 0.2]}]},
            {"node_type": "item", "files": "items.parquet", "node_id_col": "item_id",
             "features": [{"feature_col": "features", "transform": {"name": "standardize"}},
                          {"feature_col": "category", "transform": {"name": "to_categorical"}}]}],
        "edges": [{"relation": ["user", "buys", "item"], "files": "buys.parquet", "source_id_col": "user",
                   "dest_id_col": "item", "reverse": "bought_by"}],
    }
    (out / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    return out / "spec.json"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(write(sys.argv[1]))
