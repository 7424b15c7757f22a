// Prefetch a contiguous run of n elements, one hint per 64-byte cache line: the random
// rows (and neighbour lists) the kernels read next, issued ahead so the misses overlap.
#pragma once
#include <cstdint>

namespace fastsample {

template <typename T>
inline void prefetch_lines(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; i += static_cast<int64_t>(64 / sizeof(T))) __builtin_prefetch(p + i);
}

}  // namespace fastsample
