// Typed blocks' bookkeeping (fastsample/nn/block.py): each source's position among the
// sources of its type, and the MFG's edges split into one CSC per relation. numpy needs a
// stable argsort for the first and a pass over all edges per relation for the second
// (~40 ms a step on hetero-medium's input block); these are one or two linear passes.
#include "typed_block.hpp"

#include <algorithm>
#include <vector>

namespace fastsample {

constexpr int64_t kAhead = 16;  // edges ahead whose source position is prefetched (split_relations)

template <typename S>
bool positions_by_type(const S* types, int64_t n, int64_t num_types, int64_t* pos, int64_t* counts) {
  std::fill(counts, counts + num_types, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = types[i];
    if (t < 0 || t >= num_types) return false;
    pos[i] = counts[t]++;
  }
  return true;
}

template <typename T>
bool split_relations(const int64_t* indptr, const int32_t* indices, const T* edge_types, int64_t num_dst,
                     int64_t num_src, const int64_t* src_pos, int64_t num_relations, const int64_t* rel_num_dst,
                     const int64_t* indptr_at, int64_t* indices_at, int64_t* rel_indptr,
                     int32_t* rel_indices) {
  const int64_t num_edges = indptr[num_dst];
  // each relation's segment of rel_indices: its edges counted first (numpy's bincount of a
  // uint8 array widens it to int64 first, 1.2 ms on hetero-medium's 700k input edges)
  std::fill(indices_at, indices_at + num_relations + 1, 0);
  for (int64_t e = 0; e < num_edges; ++e) {
    const int64_t r = edge_types[e];
    if (r < 0 || r >= num_relations) return false;
    ++indices_at[r + 1];
  }
  for (int64_t r = 0; r < num_relations; ++r) indices_at[r + 1] += indices_at[r];
  for (int64_t r = 0; r < num_relations; ++r)
    std::fill(rel_indptr + indptr_at[r], rel_indptr + indptr_at[r] + rel_num_dst[r] + 1, 0);
  std::vector<int64_t> cursor(indices_at, indices_at + num_relations);
  // one pass: each edge to its relation's segment, counted at its destination's position;
  // src_pos[u] is a random read of MBs (beyond L2), so it is fetched some edges ahead
  for (int64_t i = 0; i < num_dst; ++i) {
    const int64_t p = src_pos[i];
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (e + kAhead < num_edges) {
        const int32_t ahead = indices[e + kAhead];
        if (ahead >= 0 && ahead < num_src) __builtin_prefetch(src_pos + ahead);
      }
      const int64_t r = edge_types[e];
      const int64_t u = indices[e];
      if (p >= rel_num_dst[r] || cursor[r] >= indices_at[r + 1] || u < 0 || u >= num_src) return false;
      ++rel_indptr[indptr_at[r] + p + 1];
      rel_indices[cursor[r]++] = static_cast<int32_t>(src_pos[u]);
    }
  }
  for (int64_t r = 0; r < num_relations; ++r) {
    if (cursor[r] != indices_at[r + 1]) return false;
    int64_t* ip = rel_indptr + indptr_at[r];
    for (int64_t d = 0; d < rel_num_dst[r]; ++d) ip[d + 1] += ip[d];
  }
  return true;
}

template bool positions_by_type<int8_t>(const int8_t*, int64_t, int64_t, int64_t*, int64_t*);
template bool positions_by_type<int64_t>(const int64_t*, int64_t, int64_t, int64_t*, int64_t*);
template bool split_relations<uint8_t>(const int64_t*, const int32_t*, const uint8_t*, int64_t, int64_t, const int64_t*, int64_t,
                                       const int64_t*, const int64_t*, int64_t*, int64_t*, int32_t*);
template bool split_relations<int16_t>(const int64_t*, const int32_t*, const int16_t*, int64_t, int64_t, const int64_t*, int64_t,
                                       const int64_t*, const int64_t*, int64_t*, int64_t*, int32_t*);

}  // namespace fastsample
