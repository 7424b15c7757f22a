// The choice rule: which neighbours a node gets, as a pure function of its key.
// C++ twin of fastsample/sampling/rng.py (read its docstring for the definition);
// every kernel must pick exactly the same positions for the same key.
#pragma once
#include <cstdint>

namespace fastsample {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t node_key(uint64_t layer_key, int64_t node) {
  return mix64(layer_key ^ (static_cast<uint64_t>(node) * kGolden));
}

inline int64_t num_picks(int64_t degree, int64_t fanout) {
  return (fanout < 0 || degree <= fanout) ? degree : fanout;
}

constexpr int64_t kBitsetMaxDegree = 4096;  // up to here, a stack bitset tracks the subset

inline int64_t uniform_upto(uint64_t nkey, int64_t i, int64_t j) {  // draw i, in 0..j
  const uint64_t r = mix64(nkey + static_cast<uint64_t>(i + 1) * kGolden);
  return static_cast<int64_t>(((r >> 32) * static_cast<uint64_t>(j + 1)) >> 32);
}

// Floyd's uniform k-subset of 0..degree-1 into out[0..k), sorted ascending (k < degree).
// Two ways to hold the subset, same result: a bitset (membership is one bit test, and
// reading the bits back yields the positions already sorted), or for hubs beyond
// kBitsetMaxDegree a linear scan followed by an insertion sort.
inline void choose_positions(uint64_t nkey, int64_t degree, int64_t k, int64_t* out) {
  if (degree <= kBitsetMaxDegree) {
    uint64_t bits[kBitsetMaxDegree / 64];
    const int64_t words = (degree + 63) >> 6;
    for (int64_t w = 0; w < words; ++w) bits[w] = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = degree - k + i;
      int64_t t = uniform_upto(nkey, i, j);
      if ((bits[t >> 6] >> (t & 63)) & 1) t = j;  // j itself is never taken yet
      bits[t >> 6] |= uint64_t{1} << (t & 63);
    }
    int64_t n = 0;
    for (int64_t w = 0; w < words; ++w) {
      for (uint64_t b = bits[w]; b; b &= b - 1) out[n++] = (w << 6) + __builtin_ctzll(b);
    }
    return;
  }
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = degree - k + i;
    int64_t t = uniform_upto(nkey, i, j);
    for (int64_t q = 0; q < i; ++q) {
      if (out[q] == t) { t = j; break; }
    }
    out[i] = t;
  }
  for (int64_t i = 1; i < k; ++i) {
    const int64_t x = out[i];
    int64_t q = i - 1;
    while (q >= 0 && out[q] > x) { out[q + 1] = out[q]; --q; }
    out[q + 1] = x;
  }
}

// With excluded edges the rule picks ranks among the node's remaining in-edges: map the
// sorted ranks pos[0..k) to positions in the whole list, skipping the x excluded
// positions ex[0..x) (sorted, absolute; the list starts at `start`).
inline void remap_positions(int64_t* pos, int64_t k, const int64_t* ex, int64_t x, int64_t start) {
  int64_t j = 0;
  for (int64_t i = 0; i < k; ++i) {
    int64_t p = pos[i] + j;
    while (j < x && ex[j] - start <= p) p = pos[i] + ++j;
    pos[i] = p;
  }
}

}  // namespace fastsample
