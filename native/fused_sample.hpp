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
template <typename Id, typename Off>
std::vector<LayerMFG<Id>> fused_sample(const Off* indptr, const Id* indices, int64_t num_nodes,
                                       const Id* seeds, int64_t num_seeds,
                                       const std::vector<int64_t>& fanouts,
                                       const std::vector<uint64_t>& layer_keys, int num_threads);

}  // namespace fastsample
