// Bias + ReLU + dropout for the native GraphSAGE layers: in place, one pass.
//
// Why not torch's: addmm first copies the broadcast bias over the whole output, ReLU is
// another pass, and dropout's CPU bernoulli_ draws at ~10 ns per element (~90 ms a step
// for layer 1's 38k x 256 output at batch 1000), more than the layer's matmul. Here the
// keep bit of element k is a hash of (seed, k): two rounds of a 32-bit integer mixer
// (Wellons' lowbias32), which vectorises (16 lanes with AVX-512) and needs no state; the
// seed comes from torch's generator, so torch.manual_seed still fixes the masks.
#include "activation.hpp"
#include "clones.hpp"

#include <algorithm>

namespace fastsample {
namespace {

inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

struct Keep {
  uint32_t s1, s2, threshold;
  Keep(uint64_t seed, double p)
      : s1(static_cast<uint32_t>(seed)), s2(static_cast<uint32_t>(seed >> 32)),
        threshold(static_cast<uint32_t>(p * 16777216.0 + 0.5)) {}
  // k's high word enters the second round, so tensors past 2^32 elements still differ
  // 1.0f if kept, else 0.0f (arithmetic, not a branch: the loops below vectorise)
  float operator()(int64_t k) const {
    const uint32_t lo = static_cast<uint32_t>(k), hi = static_cast<uint32_t>(static_cast<uint64_t>(k) >> 32);
    return static_cast<float>((lowbias32(lowbias32(lo ^ s1) + (s2 ^ (hi * 0x9E3779B9U))) >> 8) >= threshold);
  }
};

}  // namespace

FS_CLONES void bias_relu_dropout(float* x, int64_t rows, int64_t width, const float* bias, double p,
                                 uint64_t seed) {
  const Keep keep(seed, p);
  const float scale = p > 0 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * width;
    if (p > 0) {
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) {
        row[f] = std::max(row[f] + bias[f], 0.0f) * (keep(r * width + f) * scale);
      }
    } else {
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) {
        row[f] = std::max(row[f] + bias[f], 0.0f);
      }
    }
  }
}

FS_CLONES void dropout_mask(float* mask, int64_t n, double p, uint64_t seed) {
  const Keep keep(seed, p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for simd schedule(static)
  for (int64_t k = 0; k < n; ++k) mask[k] = keep(k) * scale;
}

}  // namespace fastsample
