// Prefetch a contiguous run of n elements, one hint per 64-byte cache line: the random
// rows (and neighbour lists) the kernels read next, issued ahead so the misses overlap.
#pragma once
#include <cstdint>

namespace fastsample {

// Every line the run touches: a row whose start is not line-aligned (a 100-byte int8 row
// starts anywhere in a line) spans one more line than n * sizeof(T) / 64 hints would cover.
template <int kWrite, typename T>
inline void prefetch_run(const T* p, int64_t n) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p + n);
  for (uintptr_t line = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; line < end; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(line), kWrite);
}

template <typename T>
inline void prefetch_lines(const T* p, int64_t n) {
  prefetch_run<0>(p, n);
}

// The same for a run about to be written (fetched to be owned, so the first store need not
// wait): output rows far apart, such as a column block of a product's input, whose stream
// the hardware does not follow.
template <typename T>
inline void prefetch_lines_for_write(T* p, int64_t n) {
  prefetch_run<1>(p, n);
}

}  // namespace fastsample
