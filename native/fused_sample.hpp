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

template <typename Id>
struct LayerMFG {
  Buffer<int64_t> indptr;   // num_dst + 1
  Buffer<int32_t> indices;  // local source positions
  Buffer<Id> src_ids;       // global ids, destinations first; size = num_src
  int64_t num_dst = 0;
};

// Sample layers fanouts.size()-1 .. 0 (top first) around `seeds`; see fused_sample.cpp.
// `excluded`: sorted positions in `indices` of edges no layer may pick (none: null, 0).
template <typename Id, typename Off>
std::vector<LayerMFG<Id>> fused_sample(const Off* indptr, const Id* indices, int64_t num_nodes,
                                       const Id* seeds, int64_t num_seeds,
                                       const std::vector<int64_t>& fanouts,
                                       const std::vector<uint64_t>& layer_keys, const int64_t* excluded = nullptr,
                                       int64_t num_excluded = 0);

// Typed graphs: each node's in-edges sorted by edge type (`types`, aligned with indices);
// each (node, edge type) segment is sampled alone with fanouts[l * R + r] and keys[l * R + r].
template <typename Id, typename T>
struct TypedLayerMFG {
  LayerMFG<Id> mfg;
  Buffer<T> edge_types;  // per sampled edge, aligned with mfg.indices
};

template <typename Id, typename Off, typename T>
std::vector<TypedLayerMFG<Id, T>> fused_sample_typed(const Off* indptr, const Id* indices, const T* types,
                                                     int64_t num_nodes, const Id* seeds, int64_t num_seeds,
                                                     const std::vector<int64_t>& fanouts,
                                                     const std::vector<uint64_t>& keys, int64_t num_types);

// Passes 1-3 only, for destinations whose neighbour lists are rows dst[i] - row_offset of
// (indptr, indices): the MFG indptr and the chosen neighbours' global ids, in CSC order,
// not relabelled (vanilla sampling's owner side; fastsample.sampling.sample_neighbors).
template <typename Id>
struct Picks {
  Buffer<int64_t> indptr;  // num_dst + 1
  Buffer<Id> picked;
};

template <typename Id, typename Off>
Picks<Id> sample_neighbors(const Off* indptr, const Id* indices, const Id* dst, int64_t num_dst,
                           int64_t fanout, uint64_t key, int64_t row_offset, const int64_t* excluded = nullptr,
                           int64_t num_excluded = 0);

// The same on a typed graph: fanouts and keys per edge type; the picks' types come too.
template <typename Id, typename T>
struct TypedPicks {
  Picks<Id> picks;
  Buffer<T> types;
};

template <typename Id, typename Off, typename T>
TypedPicks<Id, T> sample_neighbors_typed(const Off* indptr, const Id* indices, const T* types, const Id* dst,
                                         int64_t num_dst, const int64_t* fanouts, const uint64_t* keys,
                                         int64_t num_types, int64_t row_offset);

}  // namespace fastsample
