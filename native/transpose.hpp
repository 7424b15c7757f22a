// A block of rows written as the columns of a transposed matrix, in 16 x 16 tiles of 4 x 4
// register transposes: copying column by column instead, every element is its own cache
// line (and at a power-of-two width the rows' lines fall in a few cache sets).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace fastsample {

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols.
inline void transpose_block(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                            int64_t dst_stride) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
#if defined(__SSE2__)
      if (r1 - r0 == kTile && c1 - c0 == kTile) {
        for (int64_t r = r0; r < r1; r += 4)
          for (int64_t c = c0; c < c1; c += 4) {
            __m128 a = _mm_loadu_ps(src + r * src_stride + c), b = _mm_loadu_ps(src + (r + 1) * src_stride + c),
                   d = _mm_loadu_ps(src + (r + 2) * src_stride + c), e = _mm_loadu_ps(src + (r + 3) * src_stride + c);
            _MM_TRANSPOSE4_PS(a, b, d, e);
            _mm_storeu_ps(dst + c * dst_stride + r, a);
            _mm_storeu_ps(dst + (c + 1) * dst_stride + r, b);
            _mm_storeu_ps(dst + (c + 2) * dst_stride + r, d);
            _mm_storeu_ps(dst + (c + 3) * dst_stride + r, e);
          }
        continue;
      }
#endif
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
    }
}

// dst[0, n) = src[0, n), the whole cache lines of dst written with non-temporal stores: a
// line written whole need not be read first (a plain store reads it, doubling the traffic
// to memory). The partial lines at either end are plain stores. Call stream_fence() before
// another thread or the caller reads dst.
inline void stream_copy(const float* src, int64_t n, float* dst) {
#if defined(__SSE2__)
  constexpr int64_t kLine = 16;  // floats per 64-byte line
  const auto address = reinterpret_cast<uintptr_t>(dst);
  if (address % sizeof(float) == 0) {
    const int64_t head = std::min(n, static_cast<int64_t>((64 - address % 64) % 64 / sizeof(float)));
    const int64_t lines = (n - head) / kLine;
    std::copy(src, src + head, dst);
    for (int64_t k = head; k < head + lines * kLine; k += 4) _mm_stream_ps(dst + k, _mm_loadu_ps(src + k));
    std::copy(src + head + lines * kLine, src + n, dst + head + lines * kLine);
    return;
  }
#endif
  std::copy(src, src + n, dst);
}

inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// transpose_block's result for a block of rows that becomes the first `rows` entries of `cols`
// columns of a large transposed matrix: transposed into `scratch` (cols x rows, in cache),
// then each column's run copied out with stream_copy, then stream_fence().
inline void write_transposed(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                             int64_t dst_stride, std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(rows * cols));
  transpose_block(src, src_stride, rows, cols, scratch.data(), rows);
  for (int64_t c = 0; c < cols; ++c) stream_copy(scratch.data() + c * rows, rows, dst + c * dst_stride);
  stream_fence();
}

}  // namespace fastsample
