#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace fastsample {

// An owned, uninitialised array (no zero-fill: every slot is written by the kernel).
template <typename T>
struct Buffer {
  std::unique_ptr<T[]> data;
  int64_t size = 0;
  explicit Buffer(int64_t n = 0) : data(n ? new T[n] : nullptr), size(n) {}
};

// One layer's MFG. On a typed graph each sampled edge's type too; an untyped graph's
// (no types given) is left empty: nothing to say, and nothing written on the hot path.
template <typename Id, typename T>
struct LayerMFG {
  Buffer<int64_t> indptr;   // num_dst + 1
  Buffer<int32_t> indices;  // local source positions
  Buffer<Id> src_ids;       // global ids, destinations first; size = num_src
  int64_t num_dst = 0;
  Buffer<T> edge_types;     // per sampled edge, aligned with indices (typed graphs)
};

// Sample layers L-1 .. 0 (top first) around `seeds`; see fused_sample.cpp. R = num_types
// edge types: fanouts and keys hold L x R entries, entry l * R + r for layer l and type r.
// `types`: each in-edge's type, aligned with `indices`, each node's in-edges sorted by type,
// so a (node, type) segment is a run sampled alone; null for an untyped graph (R = 1).
// `excluded`: sorted positions in `indices` of edges no layer may pick (none: null, 0).
template <typename Id, typename Off, typename T>
std::vector<LayerMFG<Id, T>> fused_sample(const Off* indptr, const Id* indices, const T* types, int64_t num_nodes,
                                          const Id* seeds, int64_t num_seeds, const std::vector<int64_t>& fanouts,
                                          const std::vector<uint64_t>& keys, int64_t num_types,
                                          const int64_t* excluded = nullptr, int64_t num_excluded = 0);

// Passes 1-3 only, for destinations whose neighbour lists are rows dst[i] - row_offset of
// (indptr, indices): the MFG indptr and the chosen neighbours' global ids (and, typed,
// their types), in CSC order, not relabelled (vanilla sampling's owner side;
// fastsample.sampling.sample_neighbors). fanouts and keys: R entries, one per edge type.
template <typename Id, typename T>
struct Picks {
  Buffer<int64_t> indptr;  // num_dst + 1
  Buffer<Id> picked;
  Buffer<T> types;         // typed graphs: per pick; else empty
};

template <typename Id, typename Off, typename T>
Picks<Id, T> sample_neighbors(const Off* indptr, const Id* indices, const T* types, const Id* dst, int64_t num_dst,
                              const int64_t* fanouts, const uint64_t* keys, int64_t num_types, int64_t row_offset,
                              const int64_t* excluded = nullptr, int64_t num_excluded = 0);

}  // namespace fastsample
