// ReLU + dropout for the native GraphSAGE layers, in place, one pass.
//
// Why not torch's dropout: its CPU bernoulli_ draws ~10 ns per element (~90 ms per step
// for layer 1's 38k x 256 output at batch 1000), more than the layer's matmul. Here the
// keep bit of element k is a hash of (seed, k) (mix64, the sampler's mixer), which
// vectorises and parallelises with no state; the seed comes from torch's generator, so
// torch.manual_seed still fixes the masks.
#include "activation.hpp"

#include <omp.h>

#include "choice.hpp"

namespace fastsample {
namespace {

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FS_CLONES
#endif

inline bool keep(uint64_t seed, int64_t k, uint32_t threshold) {
  return static_cast<uint32_t>(mix64(seed + static_cast<uint64_t>(k) * kGolden) >> 40) >= threshold;
}

}  // namespace

uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(p * 16777216.0 + 0.5); }

FS_CLONES void relu_dropout(float* x, int64_t n, double p, uint64_t seed, int num_threads) {
  if (num_threads <= 0) num_threads = omp_get_max_threads();
  const uint32_t threshold = dropout_threshold(p);
  const float scale = p > 0 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0f;
#pragma omp parallel for simd schedule(static) num_threads(num_threads)
  for (int64_t k = 0; k < n; ++k)
    x[k] = (x[k] > 0.0f && keep(seed, k, threshold)) ? x[k] * scale : 0.0f;
}

FS_CLONES void dropout_mask(float* mask, int64_t n, double p, uint64_t seed, int num_threads) {
  if (num_threads <= 0) num_threads = omp_get_max_threads();
  const uint32_t threshold = dropout_threshold(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for simd schedule(static) num_threads(num_threads)
  for (int64_t k = 0; k < n; ++k) mask[k] = keep(seed, k, threshold) ? scale : 0.0f;
}

}  // namespace fastsample
