// Fused neighbour sampling: each layer is sampled straight into CSC and emits the next
// layer's seeds, with no COO intermediate and no O(|V|) work per call.
//
// Per layer (destinations `dst`, S of them; E sampled edges), all passes OpenMP-parallel:
//   1. count    picks per destination = min(degree, fanout)         O(S)
//   2. offsets  exclusive prefix sum -> the MFG's indptr            O(S)
//   3. sample   the choice rule (choice.hpp) writes the chosen       O(E) reads of indices
//               neighbours' global ids into their CSC slots
//   4. relabel  first appearance in edge order gets the next local id:
//               one thread: a single walk over the edges;
//               T threads:  (a) each edge claims its node with an atomic min of its
//               position, (b) count claims per thread chunk, (c) prefix, (d) claimers
//               assign local ids in edge order, (e) every edge reads its node's local id.
// Memory touched: the outputs, and one node map (node_map.hpp) in which exactly the
// sampled nodes are set. Layer l's destinations are layer l+1's sources in the same
// order, so the map stays valid from one layer to the next and is reset once, at the end.
#include "fused_sample.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "choice.hpp"
#include "node_map.hpp"

namespace fastsample {
namespace {

constexpr int64_t kParallelRelabelMin = 1 << 14;  // below this, threads cost more than they save

inline int64_t load(const int64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void store(int64_t* p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

// Claims are stored as -(e + 2): below -1 (absent) and ordered so that a larger value
// means an earlier edge. Local ids are >= 0 and are never overwritten by a claim.
inline void claim(int64_t* slot, int64_t e) {
  const int64_t want = -(e + 2);
  int64_t cur = load(slot);
  while (cur == -1 || (cur < -1 && cur < want)) {
    if (__atomic_compare_exchange_n(slot, &cur, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}

template <typename Id>
int64_t relabel_serial(const Id* picked, int64_t E, int64_t S, int64_t* m, int32_t* local, Id* src) {
  int64_t next = S;
  for (int64_t e = 0; e < E; ++e) {
    const Id u = picked[e];
    int64_t x = m[u];
    if (x < 0) {
      x = next++;
      m[u] = x;
      src[x] = u;
    }
    local[e] = static_cast<int32_t>(x);
  }
  return next;
}

template <typename Id>
int64_t relabel_parallel(const Id* picked, int64_t E, int64_t S, int64_t* m, int32_t* local, Id* src,
                         int num_threads) {
  std::vector<int64_t> base(num_threads + 1, 0);
  int used = 1;
#pragma omp parallel num_threads(num_threads)
  {
    const int T = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const int64_t lo = E * t / T, hi = E * (t + 1) / T;
    for (int64_t e = lo; e < hi; ++e) claim(&m[picked[e]], e);
#pragma omp barrier
    int64_t claims = 0;
    for (int64_t e = lo; e < hi; ++e) claims += load(&m[picked[e]]) == -(e + 2);
    base[t + 1] = claims;
#pragma omp barrier
#pragma omp single
    {
      used = T;
      for (int i = 0; i < T; ++i) base[i + 1] += base[i];
    }
    int64_t next = S + base[t];
    for (int64_t e = lo; e < hi; ++e) {
      const Id u = picked[e];
      if (load(&m[u]) == -(e + 2)) {
        store(&m[u], next);
        src[next++] = u;
      }
    }
#pragma omp barrier
    for (int64_t e = lo; e < hi; ++e) local[e] = static_cast<int32_t>(load(&m[picked[e]]));
  }
  return S + base[used];
}

template <typename Id, typename Off>
LayerMFG<Id> sample_layer(const Off* indptr, const Id* indices, const Id* dst, int64_t S,
                          int64_t fanout, uint64_t key, int64_t* m, int num_threads) {
  LayerMFG<Id> out;
  out.num_dst = S;
  out.indptr = Buffer<int64_t>(S + 1);
  int64_t* ip = out.indptr.data.get();
  ip[0] = 0;
#pragma omp parallel for schedule(static) num_threads(num_threads)
  for (int64_t i = 0; i < S; ++i) {
    const Id v = dst[i];
    ip[i + 1] = num_picks(static_cast<int64_t>(indptr[v + 1]) - indptr[v], fanout);
  }
  for (int64_t i = 0; i < S; ++i) ip[i + 1] += ip[i];
  const int64_t E = ip[S];

  Buffer<Id> picked(E);
  Id* pk = picked.data.get();
#pragma omp parallel num_threads(num_threads)
  {
    std::vector<int64_t> scratch(std::max<int64_t>(fanout, 1));
#pragma omp for schedule(dynamic, 256)
    for (int64_t i = 0; i < S; ++i)
      pick_neighbors(indptr, indices, dst[i], fanout, key, scratch.data(), pk + ip[i]);
  }

  Buffer<Id> src(S + E);
  std::copy(dst, dst + S, src.data.get());
  out.indices = Buffer<int32_t>(E);
  const int64_t num_src =
      (num_threads > 1 && E >= kParallelRelabelMin)
          ? relabel_parallel(pk, E, S, m, out.indices.data.get(), src.data.get(), num_threads)
          : relabel_serial(pk, E, S, m, out.indices.data.get(), src.data.get());
  src.size = num_src;
  out.src_ids = std::move(src);
  return out;
}

}  // namespace

template <typename Id, typename Off>
std::vector<LayerMFG<Id>> fused_sample(const Off* indptr, const Id* indices, int64_t num_nodes,
                                       const Id* seeds, int64_t num_seeds,
                                       const std::vector<int64_t>& fanouts,
                                       const std::vector<uint64_t>& layer_keys, int num_threads) {
  if (num_threads <= 0) num_threads = omp_get_max_threads();
  NodeMapPool& pool = NodeMapPool::global();
  std::unique_ptr<NodeMapPool::Map> map = pool.acquire(num_nodes);
  int64_t* m = map->data();

  for (int64_t i = 0; i < num_seeds; ++i) {
    if (m[seeds[i]] != -1) {
      for (int64_t q = 0; q < i; ++q) m[seeds[q]] = -1;
      pool.release(std::move(map));
      throw std::invalid_argument("seeds must be unique: node " + std::to_string(seeds[i]) +
                                  " appears more than once");
    }
    m[seeds[i]] = i;
  }

  std::vector<LayerMFG<Id>> layers;
  const Id* dst = seeds;
  int64_t S = num_seeds;
  for (int64_t l = static_cast<int64_t>(fanouts.size()) - 1; l >= 0; --l) {
    layers.push_back(sample_layer(indptr, indices, dst, S, fanouts[l], layer_keys[l], m, num_threads));
    dst = layers.back().src_ids.data.get();
    S = layers.back().src_ids.size;
  }
#pragma omp parallel for schedule(static) num_threads(num_threads)
  for (int64_t i = 0; i < S; ++i) m[dst[i]] = -1;
  pool.release(std::move(map));
  return layers;
}

#define FASTSAMPLE_INSTANTIATE(Id, Off)                                                        \
  template std::vector<LayerMFG<Id>> fused_sample<Id, Off>(                                  \
      const Off*, const Id*, int64_t, const Id*, int64_t, const std::vector<int64_t>&,       \
      const std::vector<uint64_t>&, int);
FASTSAMPLE_INSTANTIATE(int32_t, int32_t)
FASTSAMPLE_INSTANTIATE(int32_t, int64_t)
FASTSAMPLE_INSTANTIATE(int64_t, int64_t)

}  // namespace fastsample
