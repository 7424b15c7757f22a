// GraphSAGE mean aggregation over an MFG in CSC form, forward and backward.
//
// Forward: one pass over indptr/indices, parallel over destinations; each destination
// sums its sources' rows (contiguous, vectorised over the feature width) and scales.
// Backward: the gradient flows to sources, so the MFG is transposed first (counting
// sort by source, O(E), edges kept in destination order), then the same row-parallel
// gather runs over it. No atomics and a fixed summation order: results do not depend on
// the thread count. Memory touched: the inputs, the outputs, and the transpose (O(E)).
#include "aggregate.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace fastsample {

void mean_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* h,
                    int64_t width, float* out, int num_threads) {
  if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 64) num_threads(num_threads)
  for (int64_t i = 0; i < num_dst; ++i) {
    float* o = out + i * width;
    std::fill(o, o + width, 0.0f);
    const int64_t begin = indptr[i], end = indptr[i + 1];
    for (int64_t j = begin; j < end; ++j) {
      const float* row = h + static_cast<int64_t>(indices[j]) * width;
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) o[f] += row[f];
    }
    if (end > begin) {
      const float scale = 1.0f / static_cast<float>(end - begin);
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) o[f] *= scale;
    }
  }
}

void mean_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst,
                             int64_t num_src, const float* grad_out, int64_t width, float* grad_h,
                             int num_threads) {
  if (num_threads <= 0) num_threads = omp_get_max_threads();
  const int64_t E = indptr[num_dst];
  // transpose: for each source, the destinations it feeds, in destination order
  std::vector<int64_t> tptr(num_src + 1, 0);
  for (int64_t e = 0; e < E; ++e) ++tptr[indices[e] + 1];
  for (int64_t u = 0; u < num_src; ++u) tptr[u + 1] += tptr[u];
  std::vector<int32_t> tdst(E);
  std::vector<int64_t> pos(tptr.begin(), tptr.end() - 1);
  for (int64_t i = 0; i < num_dst; ++i)
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) tdst[pos[indices[e]]++] = static_cast<int32_t>(i);
  std::vector<float> inv(num_dst);
  for (int64_t i = 0; i < num_dst; ++i) {
    const int64_t d = indptr[i + 1] - indptr[i];
    inv[i] = d ? 1.0f / static_cast<float>(d) : 0.0f;
  }
#pragma omp parallel for schedule(dynamic, 256) num_threads(num_threads)
  for (int64_t u = 0; u < num_src; ++u) {
    float* g = grad_h + u * width;
    std::fill(g, g + width, 0.0f);
    for (int64_t k = tptr[u]; k < tptr[u + 1]; ++k) {
      const int32_t i = tdst[k];
      const float* row = grad_out + static_cast<int64_t>(i) * width;
      const float s = inv[i];
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) g[f] += s * row[f];
    }
  }
}

}  // namespace fastsample
