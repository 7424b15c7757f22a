#pragma once
#include <cstdint>

namespace fastsample {

// x = dropout(relu(x + bias)) in place, x (rows, width) row-major, bias (width,): element
// k is kept (and scaled by 1 / (1 - p)) iff it is positive and keep(seed, k): a pure
// function of (seed, k), true with probability 1 - p (to 2^-24). Counter-based, so any
// thread may draw any element, and dropout_mask below draws the same. If kept: it is set to
// the output's kept bits (kept_bits.hpp: rows x kept_bytes(width)), what the backward reads.
void bias_relu_dropout(float* x, int64_t rows, int64_t width, const float* bias, double p, uint64_t seed,
                       uint8_t* kept = nullptr);

// mask[k] = keep(seed, k) ? 1 / (1 - p) : 0.
void dropout_mask(float* mask, int64_t n, double p, uint64_t seed);

// The backward of x -> dropout(relu(x)) from its output's kept bits (bias_relu_dropout's):
// g * scale where kept, else 0 (scale = 1 / (1 - p)), g (rows, width), in one pass, written
// to grad (rows, width) and/or grad_t (width, rows: for a product's weight gradient, which
// reads it so; fastsample/nn/rgcn.py), at least one of them; and if col_sum (width): its
// column sums (the product's bias gradient), in double, the same on any thread count.
void relu_dropout_backward(const float* g, const uint8_t* kept, float scale, int64_t rows, int64_t width,
                           float* grad, float* grad_t, float* col_sum);

}  // namespace fastsample
