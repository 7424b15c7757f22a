// Row copies for the feature gather (fastsample/distributed/gather.py).
//
// numpy's fancy indexing reads each random row without looking ahead: ~200 ns a 400-byte
// row from a 100 MB shard, latency-bound. Prefetching the rows a few iterations ahead
// overlaps the misses (the same trick as the mean aggregation's gathers).
#include "rows.hpp"
#include "prefetch.hpp"

#include <cstring>

namespace fastsample {

void copy_rows(const char* src, const int64_t* src_rows, char* dst, const int64_t* dst_rows, int64_t n,
               int64_t width) {
  constexpr int64_t kAhead = 8;
  const size_t bytes = static_cast<size_t>(width);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) prefetch_lines(src + src_rows[i + kAhead] * width, width);
    const int64_t d = dst_rows != nullptr ? dst_rows[i] : i;
    std::memcpy(dst + d * width, src + src_rows[i] * width, bytes);
  }
}

void copy_rows_at(const int64_t* addr, char* dst, int64_t n, int64_t width, int64_t dst_stride) {
  constexpr int64_t kAhead = 8;
  const size_t bytes = static_cast<size_t>(width);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      prefetch_lines(reinterpret_cast<const char*>(addr[i + kAhead]), width);
      if (dst_stride != width) prefetch_lines_for_write(dst + (i + kAhead) * dst_stride, width);  // a column block
    }
    std::memcpy(dst + i * dst_stride, reinterpret_cast<const char*>(addr[i]), bytes);
  }
}

}  // namespace fastsample
