#pragma once
#include <cstdint>

namespace fastsample {

// A forward kernel's output rows, `stride` elements apart (a column block of a wider
// matrix): float32 (f32), or bfloat16 bits (bf16: what bf16 products read, written so
// directly, rounded as torch rounds). Exactly one is set.
struct OutRows {
  float* f32;
  uint16_t* bf16;
  int64_t stride;
};

// out[i, :] = mean of h[indices[j], :] over j in indptr[i]..indptr[i+1]) (0 if no edge),
// h (num_src, width) row-major. With_self, out is (num_dst, 2 * width) and row i is
// [h[i, :] | mean]: a GraphSAGE layer's whole input to its projection, in one pass. Out's
// rows are out.stride elements apart: out may be a column block of a wider matrix (the
// R-GCN writes each relation's mean into its columns of the product's input). Summed in
// fp32 either way; a bf16 out is rounded once, as stored.
void mean_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* h,
                    int64_t width, OutRows out, bool with_self);

// The same over 16-bit rows (bfloat16 if bf16, else IEEE half), widened to fp32 as read:
// layer 1 of a reduced-precision model reads its input features at half the bytes.
void mean_aggregate_half(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const uint16_t* h,
                         int64_t width, OutRows out, bool with_self, bool bf16);

// The element type of rows read through an address table: kI8 is int8 with a scale per
// column (col_scale, powers of two: fastsample/int8.py), the value q * col_scale[f].
enum class RowKind : int { kF32 = 0, kBf16 = 1, kF16 = 2, kI8 = 3 };

// mean_aggregate / mean_aggregate_half over rows found through addr: source u's row (width
// elements of `kind`) starts at address addr[u]. The input layer reads the gathered rows
// where they landed (shard, cache, receive buffer) instead of a copy of them in one matrix;
// the same sums in the same order, so the same bits. int8 rows are summed as integers and
// scaled once per column before the mean's 1 / degree: with power-of-two scales exactly the
// sums of the decoded values, so the same bits as over the decoded float32 matrix.
void mean_aggregate_at(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const int64_t* addr,
                       RowKind kind, int64_t width, OutRows out, bool with_self, const float* col_scale = nullptr);

// out[i, :] = the int8 row at addr[i] decoded, q * col_scale (exact in float32 and in
// bfloat16 for power-of-two scales): the self rows of a product's input, read where they are.
void decode_rows_at(const int64_t* addr, int64_t n, int64_t width, const float* col_scale, OutRows out);

// The input gradient of a GraphSAGE layer, in one pass over the sources:
//   grad_h[u, :] = grad_self[u, :] (u < num_dst, if grad_self)
//                + sum over edges i -> u of grad_agg[i, :] / deg(i)
// and then, if kept: grad_h[u, f] = scale * grad_h[u, f] where kept, else 0 (the backward of
// ReLU followed by dropout with keep-scale `scale`, from their output's kept bits: kept_bits.hpp).
// grad_agg and grad_self rows are *_stride apart; grad_h (num_src, width) is overwritten, or,
// if accumulate, added to (what it holds stands for the first term: a source type read by
// several relations gets its gradient in one buffer, one call per relation, no zeroed
// tensors summed by autograd: fastsample/nn/rgcn.py; not with transposed).
// If col_sum (width): it is set to grad_h's column sums, taken while each row is still in
// cache (the lower layer's bias gradient, which would otherwise be one more pass over
// grad_h), in double, in blocks of rows summed in a fixed order: the same on any thread count.
// If transposed: grad_h is (width, num_src) and holds the same values as its transpose (the
// lower layer's weight gradient reads it so, with no copy of its own: fastsample/nn/sage.py).
// If grad_t (width, num_src; grad_h row-major): the rows made are also written there
// transposed (a last pass that accumulates into grad_h and feeds a weight gradient that reads
// them so: fastsample/nn/rgcn.py). activation_blocks: the column sums are taken in
// relu_dropout_backward's blocks of rows, so the same bits as that pass would give.
void mean_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst,
                             int64_t num_src, const float* grad_agg, int64_t agg_stride,
                             const float* grad_self, int64_t self_stride, int64_t width, const uint8_t* kept, float scale,
                             float* grad_h, float* col_sum, bool transposed = false, bool accumulate = false,
                             float* grad_t = nullptr, bool activation_blocks = false);

// Whether the forward means sum in AVX-512 registers (a CPU with AVX-512BW/VL; otherwise the
// portable loops, the same bits). allow >= 0 permits (1) or forbids (0) them from now on, so
// that a test runs the portable loops on a CPU that has AVX-512 too; returns whether they
// were used before the call.
bool wide_sums(int allow = -1);

}  // namespace fastsample
