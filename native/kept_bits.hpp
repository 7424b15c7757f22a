// Which elements of a ReLU + dropout output are kept (positive), one bit each: what its
// backward needs of the output, in 1/32 of the bytes. Row r's bits are bytes
// [r * kept_bytes(width), (r + 1) * kept_bytes(width)): bit f % 8 of byte f / 8 is element f's,
// so every row owns its bytes (threads split rows) and a reader finds a row without a scan.
#pragma once
#include <cstdint>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace fastsample {

constexpr int64_t kept_bytes(int64_t width) { return (width + 7) / 8; }

// bits = (row > 0), packed: 4 compares at a time into a movemask's 4 bits (a shift per
// element instead cost as much as the ReLU/dropout pass itself).
inline void pack_kept(const float* row, int64_t width, uint8_t* bits) {
  int64_t b = 0;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  for (; 8 * b + 8 <= width; ++b) {
    const int low = _mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(row + 8 * b), zero));
    const int high = _mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(row + 8 * b + 4), zero));
    bits[b] = static_cast<uint8_t>(low | high << 4);
  }
#endif
  for (; b < kept_bytes(width); ++b) {
    uint32_t v = 0;
    for (int64_t j = 0, f = 8 * b; j < 8 && f < width; ++j, ++f) v |= static_cast<uint32_t>(row[f] > 0.0f) << j;
    bits[b] = static_cast<uint8_t>(v);
  }
}

// Each byte's bits as eight 0/1 floats, so that a row is unpacked 8 elements at a time by
// one load (vectorised), not a shift per element.
struct KeptFloats {
  float v[256][8];
  constexpr KeptFloats() : v() {
    for (int b = 0; b < 256; ++b)
      for (int j = 0; j < 8; ++j) v[b][j] = (b >> j) & 1 ? 1.0f : 0.0f;
  }
};
inline constexpr KeptFloats kKeptFloats{};

// out[f] = g[f] * (kept(f) * scale): the product torch's mask-times-scale backward makes
// (0 where dropped or not positive; g's NaN or infinity stays NaN there, as with a mask).
inline void apply_kept(const float* g, const uint8_t* bits, int64_t width, float scale, float* out) {
  const int64_t whole = width / 8;
  for (int64_t b = 0; b < whole; ++b) {
    const float* m = kKeptFloats.v[bits[b]];
#pragma omp simd
    for (int j = 0; j < 8; ++j) out[8 * b + j] = g[8 * b + j] * (m[j] * scale);
  }
  for (int64_t f = 8 * whole; f < width; ++f) out[f] = g[f] * (kKeptFloats.v[bits[whole]][f - 8 * whole] * scale);
}

}  // namespace fastsample
