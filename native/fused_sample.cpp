// Fused neighbour sampling: each layer is sampled straight into CSC and emits the next
// layer's seeds, with no COO intermediate and no O(|V|) work per call.
//
// Per layer (destinations `dst`, S of them; E sampled edges):
//   1. count    picks per destination = min(degree, fanout)        parallel, O(S)
//   2. offsets  exclusive prefix sum -> the MFG's indptr           O(S)
//   3. sample   the choice rule (choice.hpp) writes the chosen     parallel over chunks of
//               neighbours' global ids into their CSC slots        destinations, O(E) reads
//   4. relabel  walking the edges in order, a node seen for the    in chunk order, O(E)
//               first time gets the next local id and joins src
// Passes 3 and 4 are fused per chunk: `omp for ordered` samples chunks in parallel and
// relabels them one after another in order, so one thread relabels while the others
// sample, and each chunk is relabelled while its picks are still in cache. The relabel
// order is exactly the serial one, so the output does not depend on the thread count.
//
// Almost every read of a neighbour list misses the cache. Pass 3 is software-pipelined
// (class Pipeline): destination i+kDepth has its positions chosen and its neighbour slots
// prefetched while destination i is copied out, so many misses are in flight at once.
//
// Typed graphs: each node's in-edges are sorted by edge type, and each (node, edge type)
// segment is sampled alone with its type's fanout and key (class TypedPipeline). An untyped
// graph is the one-type case; it takes the leaner Pipeline, its hot path, and gives the
// same picks as TypedPipeline would with R = 1.
//
// Excluded edges (link prediction: a batch's target edges): a sorted array of positions
// in `indices`. A segment's candidates are then its in-edges minus the excluded ones, in
// order, and the choice rule runs on those as on a whole list (choice.hpp: remap_positions),
// so fanouts stay full where the remaining degree allows. None excluded: exactly as before.
//
// Memory touched: the outputs and one node map (node_map.hpp: at most 64 MiB, a hash
// table sized by the batch on larger graphs). Layer l's destinations are layer l+1's
// sources in the same order, so the map stays valid across layers; it is cleared once per
// call (the array by generation tags, the hash table zeroed).
#include "fused_sample.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "choice.hpp"
#include "node_map.hpp"
#include "prefetch.hpp"

namespace fastsample {
namespace {

constexpr int64_t kAhead = 16;    // prefetch distance (elements) for random reads
constexpr int64_t kChunk = 512;   // destinations per parallel task
constexpr int kDepth = 8;         // sampling pipeline depth (destinations in flight)

// The excluded positions within [start, end): [lo, hi) of the sorted `ex`. Most nodes
// have none, so a bitmap of blocks of positions (at most 2^20 bits, shared by the
// threads) answers "none here" with a bit test or two before any binary search.
struct Excluded {
  const int64_t* ex = nullptr;
  int64_t n = 0;
  int shift = 6;
  std::shared_ptr<const std::vector<uint64_t>> blocks;

  Excluded() = default;
  Excluded(const int64_t* excluded, int64_t count) : ex(excluded), n(count) {
    if (!n) return;
    const int64_t extent = ex[n - 1] + 1;
    while ((extent >> shift) > (int64_t{1} << 20)) ++shift;
    auto bits = std::make_shared<std::vector<uint64_t>>(((extent >> shift) >> 6) + 1, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = ex[i] >> shift;
      (*bits)[b >> 6] |= uint64_t{1} << (b & 63);
    }
    blocks = std::move(bits);
  }

  bool maybe(int64_t start, int64_t end) const {
    const int64_t first = start >> shift, last = (end - 1) >> shift;
    if (last - first > 64) return true;  // a hub: let the binary search answer
    const std::vector<uint64_t>& bits = *blocks;
    const int64_t words = static_cast<int64_t>(bits.size());
    for (int64_t b = first; b <= last; ++b) {
      if ((b >> 6) >= words) return false;
      if ((bits[b >> 6] >> (b & 63)) & 1) return true;
    }
    return false;
  }

  void range(int64_t start, int64_t end, int64_t& lo, int64_t& hi) const {
    if (!n || end <= start || !maybe(start, end)) { lo = hi = 0; return; }
    lo = std::lower_bound(ex, ex + n, start) - ex;
    hi = std::lower_bound(ex + lo, ex + n, end) - ex;
  }
};

// One segment's choice (a node's in-edges [start, start + degree), or one edge type's run
// of them): its picks k, whether they are all the remaining in-edges, and the excluded
// positions among them, ex[ex_lo..ex_hi).
struct Segment {
  int64_t start, degree, k, ex_lo, ex_hi;
  bool all;
};

// The choice rule on a segment of node v: chosen positions (relative to start) to pos[0..k)
// unless all are taken; the neighbour slots emit_segment reads next are prefetched.
// Both are forced inline: GCC left them out of line, a call per destination on the hot
// path, where the pipelines had them inline before.
template <typename Id>
__attribute__((always_inline)) inline Segment choose_segment(const Id* indices, const Excluded& ex, int64_t start, int64_t degree, int64_t fanout,
                              uint64_t key, Id v, int64_t* pos) {
  Segment g{start, degree, 0, 0, 0, false};
  ex.range(start, start + degree, g.ex_lo, g.ex_hi);
  const int64_t avail = degree - (g.ex_hi - g.ex_lo);
  g.k = num_picks(avail, fanout);
  g.all = g.k == avail;
  const Id* nbrs = indices + start;
  if (g.all) {
    prefetch_lines(nbrs, degree);
  } else {
    choose_positions(node_key(key, v), avail, g.k, pos);
    if (g.ex_hi > g.ex_lo) remap_positions(pos, g.k, ex.ex + g.ex_lo, g.ex_hi - g.ex_lo, start);
    for (int64_t i = 0; i < g.k; ++i) __builtin_prefetch(nbrs + pos[i]);
  }
  return g;
}

// The segment's k picks to out[0..k).
template <typename Id>
__attribute__((always_inline)) inline void emit_segment(const Id* indices, const Excluded& ex, const Segment& g, const int64_t* pos, Id* out) {
  const Id* nbrs = indices + g.start;
  if (g.all && g.ex_hi == g.ex_lo) {
    std::copy(nbrs, nbrs + g.k, out);
  } else if (g.all) {  // every neighbour but the excluded
    const int64_t* x = ex.ex + g.ex_lo;
    for (int64_t p = 0, j = 0, n = 0; p < g.degree; ++p) {
      if (j < g.ex_hi - g.ex_lo && x[j] - g.start == p) { ++j; continue; }
      out[n++] = nbrs[p];
    }
  } else {
    for (int64_t i = 0; i < g.k; ++i) out[i] = nbrs[pos[i]];
  }
}

// An untyped graph's pick pass (see the top): one segment per node.
template <typename Id, typename Off>
class Pipeline {
 public:
  static constexpr bool kTypes = false;  // its picks carry no edge types

  // Node v's neighbours are row v - row_offset of (indptr, indices); its key is v's own.
  Pipeline(const Off* indptr, const Id* indices, int64_t fanout, uint64_t key, int64_t row_offset = 0,
           Excluded excluded = {})
      : indptr_(indptr - row_offset), indices_(indices), fanout_(fanout), key_(key), ex_(excluded),
        width_(std::max<int64_t>(fanout, 1)), pos_(kDepth * width_) {}

  // Sample destinations dst[lo..hi) into out[ip[lo]..ip[hi]) (TypedPipeline's signature;
  // there are no types to write).
  template <typename T>
  void run(const Id* dst, int64_t lo, int64_t hi, const int64_t* ip, Id* out, T* /*no types*/) {
    for (int64_t i = lo; i < hi + kDepth - 1; ++i) {
      if (i + kDepth < hi) __builtin_prefetch(&indptr_[dst[i + kDepth]]);
      if (i < hi) prepare(dst[i], slot_[i % kDepth], &pos_[(i % kDepth) * width_]);
      const int64_t j = i - kDepth + 1;  // the oldest prepared destination
      if (j >= lo) emit_segment(indices_, ex_, slot_[j % kDepth], &pos_[(j % kDepth) * width_], out + ip[j]);
    }
  }

 private:
  // choose_segment's work written in place into the slot (returning the Segment by value
  // measured slower on this hot path)
  void prepare(Id v, Segment& s, int64_t* pos) {
    s.start = indptr_[v];
    s.degree = static_cast<int64_t>(indptr_[v + 1]) - s.start;
    ex_.range(s.start, s.start + s.degree, s.ex_lo, s.ex_hi);
    const int64_t avail = s.degree - (s.ex_hi - s.ex_lo);
    s.k = num_picks(avail, fanout_);
    s.all = s.k == avail;
    const Id* nbrs = indices_ + s.start;
    if (s.all) {
      prefetch_lines(nbrs, s.degree);
    } else {
      choose_positions(node_key(key_, v), avail, s.k, pos);
      if (s.ex_hi > s.ex_lo) remap_positions(pos, s.k, ex_.ex + s.ex_lo, s.ex_hi - s.ex_lo, s.start);
      for (int64_t i = 0; i < s.k; ++i) __builtin_prefetch(nbrs + pos[i]);
    }
  }

  const Off* indptr_;  // shifted by the row offset: indexed by node id
  const Id* indices_;
  int64_t fanout_;
  uint64_t key_;
  Excluded ex_;
  int64_t width_;
  std::vector<int64_t> pos_;
  Segment slot_[kDepth];
};

// Pass 4 over edges [lo, hi), in order: each pick's local id, a node new to the call
// entered as the next one. src is written unconditionally (a slot written for a node
// already seen is overwritten by the next new node, or lies past the end). `local` may
// alias `picked` (same width): each slot is read before it is written.
template <typename Id>
struct Relabel {
  NodeMap* map;
  Id* src;
  int64_t next;

  void run(const Id* picked, int64_t lo, int64_t hi, int32_t* local) {
    map->grow(next + (hi - lo));  // room for every pick of the chunk being new
    for (int64_t e = lo; e < hi; ++e) {
      if (e + kAhead < hi) __builtin_prefetch(map->slot_ptr(static_cast<uint64_t>(picked[e + kAhead])), 1);
      const Id u = picked[e];
      bool inserted;
      const int64_t id = map->find_or_insert(static_cast<uint64_t>(u), next, inserted);
      src[next] = u;
      next += inserted;
      local[e] = static_cast<int32_t>(id);
    }
  }
};

// Passes 1 and 2: the MFG's indptr (picks per destination, prefix-summed).
template <typename Id, typename Off>
Buffer<int64_t> count_picks(const Off* indptr, const Id* dst, int64_t S, int64_t fanout, int64_t row_offset,
                            Excluded ex = {}) {
  Buffer<int64_t> out(S + 1);
  int64_t* ip = out.data.get();
  const Off* rows = indptr - row_offset;
  ip[0] = 0;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < S; ++i) {
    if (i + kAhead < S) __builtin_prefetch(&rows[dst[i + kAhead]]);
    const Id v = dst[i];
    int64_t lo, hi;
    ex.range(rows[v], rows[v + 1], lo, hi);
    ip[i + 1] = num_picks(static_cast<int64_t>(rows[v + 1]) - rows[v] - (hi - lo), fanout);
  }
  for (int64_t i = 0; i < S; ++i) ip[i + 1] += ip[i];
  return out;
}

// A typed graph's rows for one layer: fanouts and keys per edge type. A node's in-edges
// are sorted by type, so each (node, type) segment is a run, found by binary search.
template <typename Id, typename Off, typename T>
struct TypedRows {
  const Off* indptr;  // indexed by node id (shifted by a row offset)
  const Id* indices;
  const T* types;
  const int64_t* fanouts;
  const uint64_t* keys;
  Excluded ex;

  int64_t run_end(int64_t s, int64_t e) const {
    return std::upper_bound(types + s + 1, types + e, types[s]) - types;
  }

  int64_t count(Id v) const {
    int64_t s = indptr[v], c = 0;
    const int64_t e = indptr[v + 1];
    while (s < e) {
      const int64_t end = run_end(s, e);
      int64_t lo, hi;
      ex.range(s, end, lo, hi);
      c += num_picks(end - s - (hi - lo), fanouts[types[s]]);
      s = end;
    }
    return c;
  }
};

// Passes 1 and 2 on a typed graph.
template <typename Id, typename Off, typename T>
Buffer<int64_t> count_picks(const TypedRows<Id, Off, T>& rows, const Id* dst, int64_t S) {
  Buffer<int64_t> out(S + 1);
  int64_t* ip = out.data.get();
  ip[0] = 0;
#pragma omp parallel for schedule(dynamic, kChunk)
  for (int64_t i = 0; i < S; ++i) {
    if (i + 2 * kAhead < S) __builtin_prefetch(&rows.indptr[dst[i + 2 * kAhead]]);
    if (i + kAhead < S) __builtin_prefetch(rows.types + rows.indptr[dst[i + kAhead]]);
    ip[i + 1] = rows.count(dst[i]);
  }
  for (int64_t i = 0; i < S; ++i) ip[i + 1] += ip[i];
  return out;
}

// The typed pick pass, software-pipelined as Pipeline: destination i + 2 kDepth has its
// indptr entry prefetched, i + kDepth the first lines of its types and neighbours, i its
// segments found and positions chosen (the chosen slots prefetched), and i - kDepth + 1,
// the oldest, is copied out. A slot keeps each segment and its type.
template <typename Id, typename Off, typename T>
class TypedPipeline {
 public:
  static constexpr bool kTypes = true;

  // width: the positions a node may need, one per pick of each segment not taken whole
  TypedPipeline(const TypedRows<Id, Off, T>& rows, int64_t width)
      : rows_(rows), width_(std::max<int64_t>(width, 1)), pos_(kDepth * width_) {}

  void run(const Id* dst, int64_t lo, int64_t hi, const int64_t* ip, Id* out, T* out_types) {
    for (int64_t i = lo; i < hi + kDepth - 1; ++i) {
      if (i + 2 * kDepth < hi) __builtin_prefetch(&rows_.indptr[dst[i + 2 * kDepth]]);
      if (i + kDepth < hi) {
        const int64_t s = rows_.indptr[dst[i + kDepth]];
        __builtin_prefetch(rows_.types + s);
        __builtin_prefetch(rows_.indices + s);
      }
      if (i < hi) prepare(dst[i], slot_[i % kDepth], &pos_[(i % kDepth) * width_]);
      const int64_t j = i - kDepth + 1;
      if (j >= lo) emit(slot_[j % kDepth], &pos_[(j % kDepth) * width_], out + ip[j], out_types + ip[j]);
    }
  }

 private:
  struct TypedSegment {
    Segment g;
    T type;
  };

  void prepare(Id v, std::vector<TypedSegment>& slot, int64_t* pos) {
    slot.clear();
    int64_t s = rows_.indptr[v];
    const int64_t e = rows_.indptr[v + 1];
    while (s < e) {
      const int64_t end = rows_.run_end(s, e);
      const T r = rows_.types[s];
      const Segment g = choose_segment(rows_.indices, rows_.ex, s, end - s, rows_.fanouts[r], rows_.keys[r], v, pos);
      if (!g.all) pos += g.k;
      slot.push_back({g, r});
      s = end;
    }
  }

  void emit(const std::vector<TypedSegment>& slot, const int64_t* pos, Id* out, T* out_types) const {
    for (const TypedSegment& t : slot) {
      emit_segment(rows_.indices, rows_.ex, t.g, pos, out);
      if (!t.g.all) pos += t.g.k;
      std::fill(out_types, out_types + t.g.k, t.type);
      out += t.g.k;
      out_types += t.g.k;
    }
  }

  TypedRows<Id, Off, T> rows_;
  int64_t width_;
  std::vector<int64_t> pos_;
  std::vector<TypedSegment> slot_[kDepth];
};

// Passes 3 and 4 of one layer whose indptr (passes 1 and 2) is given: each thread's own
// pipeline (`make()`) samples chunks of destinations, relabelled in chunk order (see the top).
template <typename Id, typename T, typename Make>
LayerMFG<Id, T> sample_layer(Buffer<int64_t> indptr, const Make& make, const Id* dst, int64_t S, NodeMap& map) {
  using Pipe = decltype(make());
  LayerMFG<Id, T> out;
  out.num_dst = S;
  out.indptr = std::move(indptr);
  const int64_t* ip = out.indptr.data.get();
  const int64_t E = ip[S];

  out.indices = Buffer<int32_t>(E);
  out.edge_types = Buffer<T>(Pipe::kTypes ? E : 0);
  Buffer<Id> own_picks(sizeof(Id) == sizeof(int32_t) ? 0 : E);  // int32 ids: pick in place
  Id* picked = sizeof(Id) == sizeof(int32_t) ? reinterpret_cast<Id*>(out.indices.data.get())
                                             : own_picks.data.get();
  Buffer<Id> src(S + E);
  std::copy(dst, dst + S, src.data.get());
  Relabel<Id> relabel{&map, src.data.get(), S};
  T* types = out.edge_types.data.get();

  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    Pipe pipe = make();  // built by each thread (a copied prototype measured slower on the untyped path)
#pragma omp for ordered schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = c * kChunk, hi = std::min(S, lo + kChunk);
      pipe.run(dst, lo, hi, ip, picked, types);
#pragma omp ordered
      relabel.run(picked, ip[lo], ip[hi], out.indices.data.get());
    }
  }
  src.size = relabel.next;
  out.src_ids = std::move(src);
  return out;
}

// Pass 3 alone (the owner side of vanilla sampling: no relabelling).
template <typename Id, typename T, typename Make>
Picks<Id, T> pick_neighbors(Buffer<int64_t> indptr, const Make& make, const Id* dst, int64_t S) {
  using Pipe = decltype(make());
  Picks<Id, T> out;
  out.indptr = std::move(indptr);
  const int64_t* ip = out.indptr.data.get();
  out.picked = Buffer<Id>(ip[S]);
  out.types = Buffer<T>(Pipe::kTypes ? ip[S] : 0);
  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    Pipe pipe = make();
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c)
      pipe.run(dst, c * kChunk, std::min(S, (c + 1) * kChunk), ip, out.picked.data.get(), out.types.data.get());
  }
  return out;
}

// The positions a typed layer's node may need: one per pick of each edge type's segment.
inline int64_t typed_width(const int64_t* fanouts, int64_t num_types) {
  int64_t width = 0;
  for (int64_t r = 0; r < num_types; ++r) width += std::max<int64_t>(fanouts[r], 0);
  return width;
}

// Enter the seeds as local ids 0..S-1 (or throw, the map released, on a duplicate).
template <typename Id>
void enter_seeds(NodeMapPool& pool, std::unique_ptr<NodeMap>& map, const Id* seeds, int64_t num_seeds) {
  for (int64_t i = 0; i < num_seeds; ++i) {
    bool inserted;
    map->find_or_insert(static_cast<uint64_t>(seeds[i]), i, inserted);
    if (!inserted) {
      pool.release(std::move(map));
      throw std::invalid_argument("seeds must be unique: node " + std::to_string(seeds[i]) +
                                  " appears more than once");
    }
  }
}

}  // namespace

template <typename Id, typename Off, typename T>
std::vector<LayerMFG<Id, T>> fused_sample(const Off* indptr, const Id* indices, const T* types, int64_t num_nodes,
                                          const Id* seeds, int64_t num_seeds, const std::vector<int64_t>& fanouts,
                                          const std::vector<uint64_t>& keys, int64_t num_types,
                                          const int64_t* excluded, int64_t num_excluded) {
  NodeMapPool& pool = NodeMapPool::global();
  std::unique_ptr<NodeMap> map = pool.acquire(num_nodes, num_seeds);
  enter_seeds(pool, map, seeds, num_seeds);

  std::vector<LayerMFG<Id, T>> layers;
  const Id* dst = seeds;
  int64_t S = num_seeds;
  const Excluded ex(excluded, num_excluded);
  const int64_t R = num_types;
  for (int64_t l = static_cast<int64_t>(fanouts.size()) / R - 1; l >= 0; --l) {
    const int64_t* f = fanouts.data() + l * R;
    const uint64_t* k = keys.data() + l * R;
    if (types) {
      const TypedRows<Id, Off, T> rows{indptr, indices, types, f, k, ex};
      layers.push_back(sample_layer<Id, T>(count_picks(rows, dst, S),
                                           [&] { return TypedPipeline<Id, Off, T>(rows, typed_width(f, R)); }, dst, S,
                                           *map));
    } else {
      layers.push_back(sample_layer<Id, T>(count_picks(indptr, dst, S, f[0], 0, ex),
                                           [&] { return Pipeline<Id, Off>(indptr, indices, f[0], k[0], 0, ex); }, dst, S,
                                           *map));
    }
    dst = layers.back().src_ids.data.get();
    S = layers.back().src_ids.size;
  }
  pool.release(std::move(map));
  return layers;
}

template <typename Id, typename Off, typename T>
Picks<Id, T> sample_neighbors(const Off* indptr, const Id* indices, const T* types, const Id* dst, int64_t S,
                              const int64_t* fanouts, const uint64_t* keys, int64_t num_types, int64_t row_offset,
                              const int64_t* excluded, int64_t num_excluded) {
  const Excluded ex(excluded, num_excluded);
  if (types) {
    const TypedRows<Id, Off, T> rows{indptr - row_offset, indices, types, fanouts, keys, ex};  // indexed by node id
    return pick_neighbors<Id, T>(count_picks(rows, dst, S),
                                 [&] { return TypedPipeline<Id, Off, T>(rows, typed_width(fanouts, num_types)); }, dst, S);
  }
  return pick_neighbors<Id, T>(count_picks(indptr, dst, S, fanouts[0], row_offset, ex),
                               [&] { return Pipeline<Id, Off>(indptr, indices, fanouts[0], keys[0], row_offset, ex); },
                               dst, S);
}

#define FASTSAMPLE_INSTANTIATE(Id, Off, T)                                                                           \
  template std::vector<LayerMFG<Id, T>> fused_sample<Id, Off, T>(                                                   \
      const Off*, const Id*, const T*, int64_t, const Id*, int64_t, const std::vector<int64_t>&,                    \
      const std::vector<uint64_t>&, int64_t, const int64_t*, int64_t);                                              \
  template Picks<Id, T> sample_neighbors<Id, Off, T>(const Off*, const Id*, const T*, const Id*, int64_t,           \
                                                     const int64_t*, const uint64_t*, int64_t, int64_t,             \
                                                     const int64_t*, int64_t);
FASTSAMPLE_INSTANTIATE(int32_t, int32_t, uint8_t)
FASTSAMPLE_INSTANTIATE(int32_t, int64_t, uint8_t)
FASTSAMPLE_INSTANTIATE(int64_t, int64_t, uint8_t)
FASTSAMPLE_INSTANTIATE(int32_t, int32_t, int16_t)
FASTSAMPLE_INSTANTIATE(int32_t, int64_t, int16_t)
FASTSAMPLE_INSTANTIATE(int64_t, int64_t, int16_t)

}  // namespace fastsample
