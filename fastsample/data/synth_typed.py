"""Synthetic typed (heterogeneous) graphs with IGBH's schema, for tests and benchmarks.

Node types paper, author, institute, fos (field of study); relations, each with its
reverse (the destination's view), as IGBH's and DGL's R-GAT examples add them:

    paper -cites-> paper            paper -rev_cites-> paper
    paper -written_by-> author      author -rev_written_by-> paper
    author -affiliated_to-> institute   institute -rev_affiliated_to-> author
    paper -topic-> fos              fos -rev_topic-> paper

Labels live on papers, and the signal about a paper's class is spread over its typed
neighbours, each type in a direction of its own, so a model must tell the types apart:
  * every paper, fos and author has a class; class sizes skewed as in synth.py;
  * a paper's authors are authors of its class with probability ``author_intra``, its
    topics fos of its *partner* class (c ^ 1) with probability ``topic_intra``, its
    citations papers of its class with probability ``cite_intra``; the rest at random;
    institutes are noise (an author's institute is random). Authors and topics, averaged
    together, blur each pair of classes (2i, 2i + 1) into one; told apart by relation,
    they name the class;
  * features: papers ``paper_signal * c[class] + N(0, 1)`` (weak: an MLP on a paper alone
    does poorly); authors and fos ``signal * c[pi_TYPE(class)] + N(0, 1)``, the papers'
    centroids with the classes permuted per type: one feature space, a meaning per type,
    so averaging papers, authors and fos together (a homogeneous GNN) mixes signals that
    contradict each other, which a relation-aware model tells apart; institutes have no
    features (a learnable embedding, or none) unless ``institute_features``.
The out-degrees are heavy-tailed: each relation's endpoints on the "many" side are drawn by
Pareto weights (a few prolific authors, popular fields, highly cited papers).

Everything comes from one numpy stream seeded by ``seed``, drawn in a fixed order. One
relation's edges are in memory at a time; edges.edges_to_csc_file spills them by
destination range and builds the typed CSC range by range, and features are written in
blocks, so memory is the largest relation's draws plus O(nodes) (hetero-medium: 995 MiB
peak RSS, against 1.8 GiB for the whole edge list in memory; the same bytes).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
from fastsample.progress import progress_bar

from fastsample.data.edges import edges_to_csc_file
from fastsample.data.graph import FEATURE_DTYPES, DatasetError, DatasetWriter, id_dtype, offset_dtype

CHUNK = 1 << 22  # feature values generated at a time

__all__ = ["TypedSynthConfig", "TYPED_PRESETS", "NODE_TYPES", "EDGE_TYPES", "write_typed_synthetic"]

NODE_TYPES = ("paper", "author", "institute", "fos")
RELATIONS = (("paper", "cites", "paper"), ("paper", "written_by", "author"),
             ("author", "affiliated_to", "institute"), ("paper", "topic", "fos"))
# each relation, then its reverse: edge type 2r is relation r, 2r + 1 its reverse
EDGE_TYPES = tuple(e for s, rel, d in RELATIONS for e in ((s, rel, d), (d, f"rev_{rel}", s)))


@dataclass(frozen=True)
class TypedSynthConfig:
    """The typed generator's parameters (the module doc says what each does); checked by validate()."""

    papers: int = 20_000
    authors: int = 30_000
    institutes: int = 500
    fos: int = 2_000
    cites: float = 8.0  # citations per paper
    authors_per_paper: float = 3.0
    topics_per_paper: float = 3.0
    num_classes: int = 16
    feature_dim: int = 64
    feature_dtype: str = "float32"
    paper_signal: float = 0.15
    signal: float = 1.0
    cite_intra: float = 0.2
    author_intra: float = 0.6
    topic_intra: float = 0.8
    exponent: float = 2.5  # Pareto tail of the popularity weights
    institute_features: bool = False
    train_frac: float = 0.6
    val_frac: float = 0.2
    test_frac: float = 0.2
    seed: int = 0

    def validate(self) -> None:
        for name in ("papers", "authors", "institutes", "fos", "num_classes", "feature_dim"):
            if getattr(self, name) < 1:
                raise DatasetError(f"{name} must be positive (got {getattr(self, name)})")
        for name in ("cites", "authors_per_paper", "topics_per_paper", "paper_signal", "signal"):
            if getattr(self, name) < 0:
                raise DatasetError(f"{name} must be >= 0 (got {getattr(self, name)})")
        for name in ("cite_intra", "author_intra", "topic_intra", "train_frac", "val_frac", "test_frac"):
            if not 0 <= getattr(self, name) <= 1:
                raise DatasetError(f"{name} must be in [0, 1] (got {getattr(self, name)})")
        if self.train_frac + self.val_frac + self.test_frac > 1:
            raise DatasetError("train_frac + val_frac + test_frac must be at most 1")
        if self.exponent <= 2:
            raise DatasetError(f"exponent must be > 2 (a finite mean), got {self.exponent}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise DatasetError(f"feature_dtype must be one of {', '.join(FEATURE_DTYPES)} (got {self.feature_dtype!r})")


TYPED_PRESETS = {
    "hetero-tiny": TypedSynthConfig(papers=2_000, authors=3_000, institutes=50, fos=200, num_classes=4,
                                    feature_dim=16),
    "hetero-small": TypedSynthConfig(),
    # >= 1M nodes and >= 20M stored edges over 8 edge types: the typed sampling benchmark's
    "hetero-medium": TypedSynthConfig(papers=400_000, authors=560_000, institutes=10_000, fos=30_000, cites=16.0,
                                      authors_per_paper=4.0, topics_per_paper=5.0, num_classes=32, feature_dim=128,
                                      train_frac=0.1, val_frac=0.02, test_frac=0.05),
    # >= 300M stored edges (18.3M nodes), float16 features, ~1 % training papers: the scale test
    "hetero-large": TypedSynthConfig(papers=8_000_000, authors=10_000_000, institutes=100_000, fos=200_000,
                                     cites=13.0, authors_per_paper=4.0, topics_per_paper=2.0, num_classes=64,
                                     feature_dim=128, feature_dtype="float16", train_frac=0.01, val_frac=0.002,
                                     test_frac=0.004),
}


def _classes(n: int, k: int, rng) -> np.ndarray:
    share = (np.arange(k) + 1.0) ** -0.8
    return rng.choice(k, size=n, p=share / share.sum())


def _weighted(rng, weights: np.ndarray, size: int) -> np.ndarray:
    """``size`` draws of 0..len(weights)-1 by weight."""
    cdf = np.cumsum(weights)
    return np.minimum(np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right"), len(weights) - 1)


def _pick(rng, classes: np.ndarray, weights: np.ndarray, want: np.ndarray, intra: float) -> np.ndarray:
    """For each entry of ``want`` (a class), a node: with probability ``intra`` one of that
    class (by weight), else any (by weight). Local ids within the picked type."""
    out = _weighted(rng, weights, len(want))
    inside = rng.random(len(want)) < intra
    order = np.argsort(classes, kind="stable")
    starts = np.searchsorted(classes[order], np.arange(classes.max() + 2))
    for c in np.unique(want[inside]):
        rows = np.flatnonzero(inside & (want == c))
        members = order[starts[c]:starts[c + 1]]
        if len(members):
            out[rows] = members[_weighted(rng, weights[members], len(rows))]
    return out


def _popularity(rng, n: int, exponent: float) -> np.ndarray:
    return (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))


def write_typed_synthetic(path, cfg: TypedSynthConfig, *, overwrite: bool = False, progress: bool = True) -> dict:
    """Generate the typed graph ``cfg`` describes and write it as a typed dataset directory.

    Returns:
        meta.json's contents (with a "generator" record of cfg and the time taken).
    """
    cfg.validate()
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    counts = {"paper": cfg.papers, "author": cfg.authors, "institute": cfg.institutes, "fos": cfg.fos}
    offsets = np.concatenate([[0], np.cumsum([counts[t] for t in NODE_TYPES])]).astype(np.int64)
    base = {t: int(offsets[i]) for i, t in enumerate(NODE_TYPES)}
    k = cfg.num_classes
    cls = {t: _classes(counts[t], k, rng) for t in ("paper", "author", "fos")}
    pop = {t: _popularity(rng, counts[t], cfg.exponent) for t in NODE_TYPES}
    papers = np.arange(cfg.papers)
    edges_expected = 2 * (cfg.papers * (cfg.cites + cfg.authors_per_paper + cfg.topics_per_paper) + cfg.authors)

    def per_paper(mean: float) -> np.ndarray:  # each paper's count of a relation: at least 1, mean ~ mean
        return 1 + rng.poisson(max(mean - 1.0, 0.0), cfg.papers)

    def both(r: int, s: np.ndarray, d: np.ndarray):  # relation r, then its reverse
        yield s, d, np.full(len(s), 2 * r, np.int16)
        yield d, s, np.full(len(s), 2 * r + 1, np.int16)

    def relations():  # one relation's edges in memory at a time; the draws in a fixed order
        n_cite = per_paper(cfg.cites)
        citing = np.repeat(papers, n_cite)
        cited = _pick(rng, cls["paper"], pop["paper"], cls["paper"][citing], cfg.cite_intra)
        yield from both(0, base["paper"] + citing, base["paper"] + cited)
        del citing, cited
        n_auth = per_paper(cfg.authors_per_paper)
        written = np.repeat(papers, n_auth)
        writer = _pick(rng, cls["author"], pop["author"], cls["paper"][written], cfg.author_intra)
        yield from both(1, base["paper"] + written, base["author"] + writer)
        del written, writer
        inst = _weighted(rng, pop["institute"], cfg.authors)
        yield from both(2, base["author"] + np.arange(cfg.authors), base["institute"] + inst)
        n_topic = per_paper(cfg.topics_per_paper)
        tagged = np.repeat(papers, n_topic)
        # a paper's topics are of its partner class (c ^ 1): what a topic says differs from what
        # an author says, so averaging them together blurs each pair of classes into one
        topic = _pick(rng, cls["fos"], pop["fos"], np.minimum(cls["paper"][tagged] ^ 1, k - 1), cfg.topic_intra)
        yield from both(3, base["paper"] + tagged, base["fos"] + topic)

    n = int(offsets[-1])
    ids = id_dtype(n)
    with DatasetWriter(path, overwrite=overwrite) as out:
        with progress_bar(total=8, desc="typed edges", unit="relation", disable=not progress) as bar:
            indptr = edges_to_csc_file(relations(), n, out.tmp / "indices.npy", symmetric=False,
                                       expected_edges=edges_expected, progress=lambda _: bar.update(),
                                       types_path=out.tmp / "type_per_edge.npy", num_types=len(EDGE_TYPES))
        out.save("indptr", indptr.astype(offset_dtype(int(indptr[-1]))))
        centroids = rng.standard_normal((k, cfg.feature_dim), dtype=np.float32)
        for t in NODE_TYPES:
            if t == "institute" and not cfg.institute_features:
                continue
            rows = out.create(f"features/{t}", (counts[t], cfg.feature_dim), np.dtype(cfg.feature_dtype))
            scale = cfg.paper_signal if t == "paper" else cfg.signal if t != "institute" else 0.0
            step = max(1, CHUNK // cfg.feature_dim)
            for a in progress_bar(range(0, counts[t], step), desc=f"{t} features", disable=not progress):
                b = min(counts[t], a + step)
                x = rng.standard_normal((b - a, cfg.feature_dim), dtype=np.float32)
                if t != "institute":  # one feature space: the papers' centroids
                    x += scale * centroids[cls[t][a:b]]
                rows[a:b] = x
            rows.flush()
            del rows
        order = rng.permutation(cfg.papers)
        n_train, n_val = int(cfg.train_frac * cfg.papers), int(cfg.val_frac * cfg.papers)
        n_test = int(cfg.test_frac * cfg.papers)
        for name, (a, b) in {"train": (0, n_train), "val": (n_train, n_train + n_val),
                             "test": (n_train + n_val, n_train + n_val + n_test)}.items():
            out.save(name, (base["paper"] + np.sort(order[a:b])).astype(ids))
        out.save("labels", cls["paper"].astype(np.int64))
        schema = {"node_types": NODE_TYPES, "node_type_offset": offsets, "edge_types": EDGE_TYPES,
                  "target_type": "paper"}
        return out.commit(name=f"synthetic-hetero-{n}", num_classes=k, schema=schema,
                          generator={"typed": asdict(cfg), "seconds": round(time.perf_counter() - t0, 2)})


