#pragma once
#include <cstdint>

namespace fastsample {

// Graph attention (GAT) aggregation over one relation's MFG in CSC form, H heads, fused:
// for each destination v and head h, in one pass over v's segment,
//   e_j   = leaky_relu(a_src[u_j, h] + a_dst[v, h], slope)      u_j = indices[j]
//   alpha = softmax of e over the segment (PyG's: max-shifted, sum + 1e-16)
//   out[v, h*C:(h+1)*C] = sum_j alpha_j xs_h[u_j]                (0 without edges)
// xs (num_src, width): if shared, every head reads the whole row (C = width: the rows
// before their projection, which the caller applies per head afterwards), else head h
// reads its slice h*C:(h+1)*C (C = width / H: rows already projected). out (num_dst, H*C);
// alpha (E, H) is written for the backward.
void gat_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* xs,
                   int64_t width, const float* a_src, const float* a_dst, int64_t heads, bool shared, float slope,
                   float* out, float* alpha);

// Its backward, given g = dL/dout (num_dst, H*C): grad_xs (num_src, width), grad_a_src
// (num_src, H) and grad_a_dst (num_dst, H), all overwritten. No atomics, a fixed summation
// order (sources through a transpose of the MFG): the same on any thread count.
void gat_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst, int64_t num_src,
                            const float* xs, int64_t width, const float* a_src, const float* a_dst,
                            const float* alpha, const float* g, int64_t heads, bool shared, float slope,
                            float* grad_xs, float* grad_a_src, float* grad_a_dst);

}  // namespace fastsample
