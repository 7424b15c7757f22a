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
// Excluded edges (link prediction: a batch's target edges): a sorted array of positions
// in `indices`. A node's candidates are then its in-edges minus the excluded ones, in
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

template <typename Id, typename Off>
class Pipeline {
 public:
  // Node v's neighbours are row v - row_offset of (indptr, indices); its key is v's own.
  Pipeline(const Off* indptr, const Id* indices, int64_t fanout, uint64_t key, int64_t row_offset = 0,
           Excluded excluded = {})
      : indptr_(indptr - row_offset), indices_(indices), fanout_(fanout), key_(key), ex_(excluded),
        width_(std::max<int64_t>(fanout, 1)), pos_(kDepth * width_) {}

  // Sample destinations dst[lo..hi) into out[ip[lo]..ip[hi]).
  void run(const Id* dst, int64_t lo, int64_t hi, const int64_t* ip, Id* out) {
    for (int64_t i = lo; i < hi + kDepth - 1; ++i) {
      if (i + kDepth < hi) __builtin_prefetch(&indptr_[dst[i + kDepth]]);
      if (i < hi) prepare(dst[i], slot_[i % kDepth], &pos_[(i % kDepth) * width_]);
      const int64_t j = i - kDepth + 1;  // the oldest prepared destination
      if (j >= lo) emit(slot_[j % kDepth], &pos_[(j % kDepth) * width_], out + ip[j]);
    }
  }

 private:
  struct Slot { int64_t start, k, degree, ex_lo, ex_hi; bool all; };

  void prepare(Id v, Slot& s, int64_t* pos) {
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

  void emit(const Slot& s, const int64_t* pos, Id* out) const {
    const Id* nbrs = indices_ + s.start;
    if (s.all && s.ex_hi == s.ex_lo) {
      std::copy(nbrs, nbrs + s.k, out);
    } else if (s.all) {  // every neighbour but the excluded
      const int64_t* ex = ex_.ex + s.ex_lo;
      for (int64_t p = 0, j = 0, n = 0; p < s.degree; ++p) {
        if (j < s.ex_hi - s.ex_lo && ex[j] - s.start == p) { ++j; continue; }
        out[n++] = nbrs[p];
      }
    } else {
      for (int64_t i = 0; i < s.k; ++i) out[i] = nbrs[pos[i]];
    }
  }

  const Off* indptr_;  // shifted by the row offset: indexed by node id
  const Id* indices_;
  int64_t fanout_;
  uint64_t key_;
  Excluded ex_;
  int64_t width_;
  std::vector<int64_t> pos_;
  Slot slot_[kDepth];
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

template <typename Id, typename Off>
LayerMFG<Id> sample_layer(const Off* indptr, const Id* indices, const Id* dst, int64_t S,
                          int64_t fanout, uint64_t key, NodeMap& map, Excluded ex) {
  LayerMFG<Id> out;
  out.num_dst = S;
  out.indptr = count_picks(indptr, dst, S, fanout, 0, ex);
  const int64_t* ip = out.indptr.data.get();
  const int64_t E = ip[S];

  out.indices = Buffer<int32_t>(E);
  Buffer<Id> own_picks(sizeof(Id) == sizeof(int32_t) ? 0 : E);  // int32 ids: pick in place
  Id* picked = sizeof(Id) == sizeof(int32_t) ? reinterpret_cast<Id*>(out.indices.data.get())
                                             : own_picks.data.get();
  Buffer<Id> src(S + E);
  std::copy(dst, dst + S, src.data.get());
  Relabel<Id> relabel{&map, src.data.get(), S};

  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    Pipeline<Id, Off> pipe(indptr, indices, fanout, key, 0, ex);
#pragma omp for ordered schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = c * kChunk, hi = std::min(S, lo + kChunk);
      pipe.run(dst, lo, hi, ip, picked);
#pragma omp ordered
      relabel.run(picked, ip[lo], ip[hi], out.indices.data.get());
    }
  }
  src.size = relabel.next;
  out.src_ids = std::move(src);
  return out;
}

// A typed graph's rows for one layer: fanouts and keys per edge type. A node's in-edges
// are sorted by type, so each (node, type) segment is a run, found by binary search.
template <typename Id, typename Off, typename T>
struct TypedRows {
  const Off* indptr;
  const Id* indices;
  const T* types;
  const int64_t* fanouts;
  const uint64_t* keys;

  int64_t run_end(int64_t s, int64_t e) const {
    return std::upper_bound(types + s + 1, types + e, types[s]) - types;
  }

  int64_t count(Id v) const {
    int64_t s = indptr[v], c = 0;
    const int64_t e = indptr[v + 1];
    while (s < e) {
      const int64_t end = run_end(s, e);
      c += num_picks(end - s, fanouts[types[s]]);
      s = end;
    }
    return c;
  }

};

// The typed pick pass, software-pipelined as Pipeline: destination i + 2 kDepth has its
// indptr entry prefetched, i + kDepth the first lines of its types and neighbours, i its
// segments found and positions chosen (the chosen slots prefetched), and i - kDepth + 1,
// the oldest, is copied out. A slot keeps each segment: start, picks, and whether all.
template <typename Id, typename Off, typename T>
class TypedPipeline {
 public:
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
  struct Segment { int64_t start, k; T type; bool all; };

  void prepare(Id v, std::vector<Segment>& slot, int64_t* pos) {
    slot.clear();
    int64_t s = rows_.indptr[v];
    const int64_t e = rows_.indptr[v + 1];
    while (s < e) {
      const int64_t end = rows_.run_end(s, e);
      const T r = rows_.types[s];
      const int64_t d = end - s, k = num_picks(d, rows_.fanouts[r]);
      const Id* nbrs = rows_.indices + s;
      if (k == d) {
        prefetch_lines(nbrs, k);
      } else {
        choose_positions(node_key(rows_.keys[r], v), d, k, pos);
        for (int64_t i = 0; i < k; ++i) __builtin_prefetch(nbrs + pos[i]);
        pos += k;
      }
      slot.push_back({s, k, r, k == d});
      s = end;
    }
  }

  void emit(const std::vector<Segment>& slot, const int64_t* pos, Id* out, T* out_types) const {
    for (const Segment& g : slot) {
      const Id* nbrs = rows_.indices + g.start;
      if (g.all) {
        std::copy(nbrs, nbrs + g.k, out);
      } else {
        for (int64_t i = 0; i < g.k; ++i) out[i] = nbrs[pos[i]];
        pos += g.k;
      }
      std::fill(out_types, out_types + g.k, g.type);
      out += g.k;
      out_types += g.k;
    }
  }

  const TypedRows<Id, Off, T>& rows_;
  int64_t width_;
  std::vector<int64_t> pos_;
  std::vector<Segment> slot_[kDepth];
};

template <typename Id, typename Off, typename T>
TypedLayerMFG<Id, T> sample_layer_typed(const TypedRows<Id, Off, T>& rows, const Id* dst, int64_t S, int64_t width,
                                        NodeMap& map) {
  TypedLayerMFG<Id, T> out;
  out.mfg.num_dst = S;
  out.mfg.indptr = Buffer<int64_t>(S + 1);
  int64_t* ip = out.mfg.indptr.data.get();
  ip[0] = 0;
#pragma omp parallel for schedule(dynamic, kChunk)
  for (int64_t i = 0; i < S; ++i) {
    if (i + 2 * kAhead < S) __builtin_prefetch(&rows.indptr[dst[i + 2 * kAhead]]);
    if (i + kAhead < S) __builtin_prefetch(rows.types + rows.indptr[dst[i + kAhead]]);
    ip[i + 1] = rows.count(dst[i]);
  }
  for (int64_t i = 0; i < S; ++i) ip[i + 1] += ip[i];
  const int64_t E = ip[S];

  out.mfg.indices = Buffer<int32_t>(E);
  out.edge_types = Buffer<T>(E);
  Buffer<Id> own_picks(sizeof(Id) == sizeof(int32_t) ? 0 : E);  // int32 ids: pick in place
  Id* picked = sizeof(Id) == sizeof(int32_t) ? reinterpret_cast<Id*>(out.mfg.indices.data.get())
                                             : own_picks.data.get();
  Buffer<Id> src(S + E);
  std::copy(dst, dst + S, src.data.get());
  Relabel<Id> relabel{&map, src.data.get(), S};
  T* types = out.edge_types.data.get();

  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    TypedPipeline<Id, Off, T> pipe(rows, width);
#pragma omp for ordered schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = c * kChunk, hi = std::min(S, lo + kChunk);
      pipe.run(dst, lo, hi, ip, picked, types);
#pragma omp ordered
      relabel.run(picked, ip[lo], ip[hi], out.mfg.indices.data.get());
    }
  }
  src.size = relabel.next;
  out.mfg.src_ids = std::move(src);
  return out;
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
std::vector<TypedLayerMFG<Id, T>> fused_sample_typed(const Off* indptr, const Id* indices, const T* types,
                                                     int64_t num_nodes, const Id* seeds, int64_t num_seeds,
                                                     const std::vector<int64_t>& fanouts,
                                                     const std::vector<uint64_t>& keys, int64_t num_types) {
  NodeMapPool& pool = NodeMapPool::global();
  std::unique_ptr<NodeMap> map = pool.acquire(num_nodes, num_seeds);
  enter_seeds(pool, map, seeds, num_seeds);
  std::vector<TypedLayerMFG<Id, T>> layers;
  const Id* dst = seeds;
  int64_t S = num_seeds;
  const int64_t L = static_cast<int64_t>(fanouts.size()) / num_types;
  for (int64_t l = L - 1; l >= 0; --l) {
    const int64_t* f = fanouts.data() + l * num_types;
    const TypedRows<Id, Off, T> rows{indptr, indices, types, f, keys.data() + l * num_types};
    int64_t width = 0;  // positions a node may need: one per pick of each sampled (not whole) segment
    for (int64_t r = 0; r < num_types; ++r) width += std::max<int64_t>(f[r], 0);
    layers.push_back(sample_layer_typed(rows, dst, S, width, *map));
    dst = layers.back().mfg.src_ids.data.get();
    S = layers.back().mfg.src_ids.size;
  }
  pool.release(std::move(map));
  return layers;
}

template <typename Id, typename Off>
std::vector<LayerMFG<Id>> fused_sample(const Off* indptr, const Id* indices, int64_t num_nodes,
                                       const Id* seeds, int64_t num_seeds,
                                       const std::vector<int64_t>& fanouts,
                                       const std::vector<uint64_t>& layer_keys, const int64_t* excluded,
                                       int64_t num_excluded) {
  NodeMapPool& pool = NodeMapPool::global();
  std::unique_ptr<NodeMap> map = pool.acquire(num_nodes, num_seeds);
  enter_seeds(pool, map, seeds, num_seeds);

  std::vector<LayerMFG<Id>> layers;
  const Id* dst = seeds;
  int64_t S = num_seeds;
  const Excluded ex(excluded, num_excluded);
  for (int64_t l = static_cast<int64_t>(fanouts.size()) - 1; l >= 0; --l) {
    layers.push_back(sample_layer(indptr, indices, dst, S, fanouts[l], layer_keys[l], *map,
                                  ex));
    dst = layers.back().src_ids.data.get();
    S = layers.back().src_ids.size;
  }
  pool.release(std::move(map));
  return layers;
}

template <typename Id, typename Off>
Picks<Id> sample_neighbors(const Off* indptr, const Id* indices, const Id* dst, int64_t S, int64_t fanout,
                           uint64_t key, int64_t row_offset, const int64_t* excluded, int64_t num_excluded) {
  Picks<Id> out;
  const Excluded ex(excluded, num_excluded);
  out.indptr = count_picks(indptr, dst, S, fanout, row_offset, ex);
  const int64_t* ip = out.indptr.data.get();
  out.picked = Buffer<Id>(ip[S]);
  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    Pipeline<Id, Off> pipe(indptr, indices, fanout, key, row_offset, ex);
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) pipe.run(dst, c * kChunk, std::min(S, (c + 1) * kChunk), ip, out.picked.data.get());
  }
  return out;
}

template <typename Id, typename Off, typename T>
TypedPicks<Id, T> sample_neighbors_typed(const Off* indptr, const Id* indices, const T* types, const Id* dst,
                                         int64_t S, const int64_t* fanouts, const uint64_t* keys,
                                         int64_t num_types, int64_t row_offset) {
  TypedPicks<Id, T> out;
  const TypedRows<Id, Off, T> rows{indptr - row_offset, indices, types, fanouts, keys};  // indexed by node id
  out.picks.indptr = Buffer<int64_t>(S + 1);
  int64_t* ip = out.picks.indptr.data.get();
  ip[0] = 0;
#pragma omp parallel for schedule(dynamic, kChunk)
  for (int64_t i = 0; i < S; ++i) ip[i + 1] = rows.count(dst[i]);
  for (int64_t i = 0; i < S; ++i) ip[i + 1] += ip[i];
  out.picks.picked = Buffer<Id>(ip[S]);
  out.types = Buffer<T>(ip[S]);
  int64_t width = 0;
  for (int64_t r = 0; r < num_types; ++r) width += std::max<int64_t>(fanouts[r], 0);
  const int64_t chunks = (S + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    TypedPipeline<Id, Off, T> pipe(rows, width);
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c)
      pipe.run(dst, c * kChunk, std::min(S, (c + 1) * kChunk), ip, out.picks.picked.data.get(), out.types.data.get());
  }
  return out;
}

#define FASTSAMPLE_INSTANTIATE(Id, Off)                                                        \
  template std::vector<LayerMFG<Id>> fused_sample<Id, Off>(                                  \
      const Off*, const Id*, int64_t, const Id*, int64_t, const std::vector<int64_t>&,       \
      const std::vector<uint64_t>&, const int64_t*, int64_t);                            \
  template Picks<Id> sample_neighbors<Id, Off>(const Off*, const Id*, const Id*, int64_t, int64_t, \
                                               uint64_t, int64_t, const int64_t*, int64_t);
FASTSAMPLE_INSTANTIATE(int32_t, int32_t)
FASTSAMPLE_INSTANTIATE(int32_t, int64_t)
FASTSAMPLE_INSTANTIATE(int64_t, int64_t)

#define FASTSAMPLE_INSTANTIATE_TYPED(Id, Off, T)                                                  \
  template std::vector<TypedLayerMFG<Id, T>> fused_sample_typed<Id, Off, T>(                    \
      const Off*, const Id*, const T*, int64_t, const Id*, int64_t, const std::vector<int64_t>&, \
      const std::vector<uint64_t>&, int64_t);                                                   \
  template TypedPicks<Id, T> sample_neighbors_typed<Id, Off, T>(const Off*, const Id*, const T*, const Id*, \
                                                                int64_t, const int64_t*, const uint64_t*,   \
                                                                int64_t, int64_t);
FASTSAMPLE_INSTANTIATE_TYPED(int32_t, int32_t, uint8_t)
FASTSAMPLE_INSTANTIATE_TYPED(int32_t, int64_t, uint8_t)
FASTSAMPLE_INSTANTIATE_TYPED(int64_t, int64_t, uint8_t)
FASTSAMPLE_INSTANTIATE_TYPED(int32_t, int32_t, int16_t)
FASTSAMPLE_INSTANTIATE_TYPED(int32_t, int64_t, int16_t)
FASTSAMPLE_INSTANTIATE_TYPED(int64_t, int64_t, int16_t)

}  // namespace fastsample
