#pragma once
#include <cstdint>

namespace fastsample {

// Dropout's keep decision for element k, a pure function of (seed, k): kept with
// probability 1 - p (to 2^-24). Counter-based, so any thread may draw any element and the
// fused kernel and the mask below draw the same.
uint32_t dropout_threshold(double p);

// x = dropout(relu(x)) in place: x[k] = x[k] > 0 and keep(seed, k) ? x[k] * scale : 0.
void relu_dropout(float* x, int64_t n, double p, uint64_t seed, int num_threads);

// mask[k] = keep(seed, k) ? scale : 0, scale = 1 / (1 - p).
void dropout_mask(float* mask, int64_t n, double p, uint64_t seed, int num_threads);

}  // namespace fastsample
