// Adam on embedding rows at their owners: see row_adam.hpp. Memory-bound: each run reads
// and writes a random row of the table and of both moments (MBs apart), so the rows of
// the run kAhead ahead are prefetched. Built with -ffp-contract=off (CMakeLists.txt): a
// fused multiply-add would round differently from SparseAdam's (and the numba fallback's)
// separate multiply and add. Its division and square root round the same at any vector
// width, so the AVX2/AVX-512 builds (FS_CLONES) give the baseline's bits.
#include "row_adam.hpp"

#include <cmath>
#include <vector>

#include "clones.hpp"
#include "prefetch.hpp"

namespace fastsample {
namespace {
constexpr int64_t kAhead = 4;  // runs ahead whose rows are prefetched
}

FS_CLONES void adam_rows(float* table, float* m, float* v, int64_t dim, const int64_t* rows, const int64_t* value_addr,
               const int64_t* order, const int64_t* starts, int64_t runs, float divisor, float one_minus_beta1,
               float one_minus_beta2, float eps, float neg_step) {
#pragma omp parallel
  {
    std::vector<float> g(dim);
#pragma omp for schedule(static)
    for (int64_t s = 0; s < runs; ++s) {
      if (s + kAhead < runs) {
        const int64_t first = order[starts[s + kAhead]];
        const int64_t r = rows[first];
        prefetch_lines(reinterpret_cast<const float*>(value_addr[first]), dim);
        prefetch_lines(table + r * dim, dim);
        prefetch_lines(m + r * dim, dim);
        prefetch_lines(v + r * dim, dim);
      }
      const float* first = reinterpret_cast<const float*>(value_addr[order[starts[s]]]);
      for (int64_t j = 0; j < dim; ++j) g[j] = first[j];
      for (int64_t k = starts[s] + 1; k < starts[s + 1]; ++k) {  // duplicates in arrival order
        const float* more = reinterpret_cast<const float*>(value_addr[order[k]]);
#pragma omp simd
        for (int64_t j = 0; j < dim; ++j) g[j] += more[j];
      }
      const int64_t r = rows[order[starts[s]]];
      float* t = table + r * dim;
      float* mr = m + r * dim;
      float* vr = v + r * dim;
#pragma omp simd
      for (int64_t j = 0; j < dim; ++j) {
        const float gj = g[j] / divisor;
        const float m_new = (gj - mr[j]) * one_minus_beta1 + mr[j];  // SparseAdam's order of operations
        const float v_new = (gj * gj - vr[j]) * one_minus_beta2 + vr[j];
        mr[j] = m_new;
        vr[j] = v_new;
        t[j] += neg_step * (m_new / (std::sqrt(v_new) + eps));
      }
    }
  }
}

}  // namespace fastsample
