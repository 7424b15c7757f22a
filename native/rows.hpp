#pragma once
#include <cstdint>

namespace fastsample {

// dst[dst_rows ? dst_rows[i] : i, :] = src[src_rows[i], :] for i < n; rows are `width`
// floats, contiguous. The feature gather's copies: random rows in, rows out.
void copy_rows(const float* src, const int64_t* src_rows, float* dst, const int64_t* dst_rows, int64_t n,
               int64_t width);

}  // namespace fastsample
