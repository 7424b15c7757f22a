#pragma once
#include <cstdint>

namespace fastsample {

// out[i, :] = mean of h[indices[j], :] over j in indptr[i]..indptr[i+1]) (0 if no edge).
void mean_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* h,
                    int64_t width, float* out, int num_threads);

// grad_h = A^T grad_out for the same mean: grad_h[u, :] = sum over edges i -> u of
// grad_out[i, :] / deg(i). grad_h has num_src rows and is fully overwritten.
void mean_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst,
                             int64_t num_src, const float* grad_out, int64_t width, float* grad_h,
                             int num_threads);

}  // namespace fastsample
