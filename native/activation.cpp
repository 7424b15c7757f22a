// Bias + ReLU + dropout for the native GraphSAGE layers: in place, one pass.
//
// Why not torch's: addmm first copies the broadcast bias over the whole output, ReLU is
// another pass, and dropout's CPU bernoulli_ draws at ~10 ns per element (~90 ms a step
// for layer 1's 38k x 256 output at batch 1000), more than the layer's matmul. Here the
// keep bit of element k is a hash of (seed, k): two rounds of a 32-bit integer mixer
// (Wellons' lowbias32), which vectorises (8 lanes with AVX2, 16 with AVX-512) and needs no state; the
// seed comes from torch's generator, so torch.manual_seed still fixes the masks.
#include "activation.hpp"
#include "clones.hpp"
#include "column_sums.hpp"
#include "kept_bits.hpp"
#include "transpose.hpp"

#include <algorithm>
#include <vector>

namespace fastsample {
namespace {

inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

// keep(seed, k) = lowbias32(lowbias32(lo(k) ^ s1) + (s2 ^ hi(k) * 0x9E3779B9)) >> 8 >= threshold:
// k's high word enters the second round, so tensors past 2^32 elements still differ. The
// loops below run it in 32-bit lanes: hi(k) is fixed over a run of k that does not cross
// a multiple of 2^32, and every operand stays below 2^31 where it is compared or
// converted, so AVX2 (no unsigned compares, no 64-bit lane multiplies) vectorises it too
// (the 64-bit form stayed scalar there: ~10 ns an element).
struct Keep {
  uint32_t s1, s2;
  int32_t threshold;
  Keep(uint64_t seed, double p)
      : s1(static_cast<uint32_t>(seed)), s2(static_cast<uint32_t>(seed >> 32)),
        threshold(static_cast<int32_t>(p * 16777216.0 + 0.5)) {}
  uint32_t high(uint64_t k) const { return s2 ^ (static_cast<uint32_t>(k >> 32) * 0x9E3779B9U); }
  // 1.0f if kept, else 0.0f (arithmetic, not a branch)
  float bit(uint32_t lo, uint32_t high) const {
    return static_cast<float>(static_cast<int32_t>(lowbias32(lowbias32(lo ^ s1) + high) >> 8) >= threshold);
  }
};

// body(j, kept) for j < n, the keep bit of element k0 + j; n < 2^31.
template <typename Body>
[[gnu::always_inline]] inline void for_keep(const Keep& keep, int64_t k0, int32_t n, Body&& body) {
  int32_t i = 0;
  while (i < n) {
    const uint64_t k = static_cast<uint64_t>(k0) + static_cast<uint64_t>(i);
    const uint64_t to_wrap = (uint64_t(1) << 32) - (k & 0xffffffffu);
    const int32_t run = static_cast<int32_t>(std::min<uint64_t>(static_cast<uint64_t>(n - i), to_wrap));
    const uint32_t lo = static_cast<uint32_t>(k), high = keep.high(k);
#pragma omp simd
    for (int32_t j = 0; j < run; ++j) body(i + j, keep.bit(lo + static_cast<uint32_t>(j), high));
    i += run;
  }
}

constexpr int64_t kMaskBlock = 1 << 14;  // dropout_mask's elements per task

}  // namespace

FS_CLONES void bias_relu_dropout(float* x, int64_t rows, int64_t width, const float* bias, double p,
                                 uint64_t seed, uint8_t* kept) {
  const Keep keep(seed, p);
  const float scale = p > 0 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * width;
    if (p > 0) {
      for_keep(keep, r * width, static_cast<int32_t>(width),
               [&](int32_t f, float kept) { row[f] = std::max(row[f] + bias[f], 0.0f) * (kept * scale); });
    } else {
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) {
        row[f] = std::max(row[f] + bias[f], 0.0f);
      }
    }
    if (kept != nullptr) pack_kept(row, width, kept + r * kept_bytes(width));  // the row is still in L1
  }
}

FS_CLONES void dropout_mask(float* mask, int64_t n, double p, uint64_t seed) {
  const Keep keep(seed, p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += kMaskBlock) {
    float* out = mask + b;
    for_keep(keep, b, static_cast<int32_t>(std::min(kMaskBlock, n - b)),
             [&](int32_t j, float kept) { out[j] = kept * scale; });
  }
}

FS_CLONES void relu_dropout_backward(const float* g, const uint8_t* kept, float scale, int64_t rows, int64_t width,
                                     float* grad, float* grad_t, float* col_sum) {
  // A block of rows at a time (~128 KiB, in L2): the gradient made there (or in grad), then
  // written as columns (write_transposed: runs of whole cache lines, stored without reading
  // them first) and summed into the block's column sums while still in cache (ColumnSums).
  const int64_t block_rows = activation_block_rows(width);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  ColumnSums sums(blocks, width, col_sum != nullptr);
#pragma omp parallel
  {
    std::vector<float> buf(grad == nullptr ? block_rows * width : 0), scratch;
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t u0 = b * block_rows, n = std::min(block_rows, rows - u0);
      float* out = grad != nullptr ? grad + u0 * width : buf.data();
      for (int64_t r = 0; r < n; ++r) {
        float* row = out + r * width;
        apply_kept(g + (u0 + r) * width, kept + (u0 + r) * kept_bytes(width), width, scale, row);
        if (col_sum != nullptr) sums.add(b, row);
      }
      if (grad_t != nullptr) write_transposed(out, width, n, width, grad_t + u0, rows, scratch);
    }
  }
  if (col_sum != nullptr) sums.write(col_sum);
}

}  // namespace fastsample
