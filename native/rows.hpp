#pragma once
#include <cstdint>

namespace fastsample {

// dst[dst_rows ? dst_rows[i] : i, :] = src[src_rows[i], :] for i < n; rows are `width`
// bytes, contiguous (any element type). The feature gather's copies: random rows in, rows out.
void copy_rows(const char* src, const int64_t* src_rows, char* dst, const int64_t* dst_rows, int64_t n,
               int64_t width);

// The `width` bytes at address addr[i] to dst + i * dst_stride, for i < n: rows read
// through an address table (fastsample/rows.py) copied into one matrix, or into a column
// block of a wider one.
void copy_rows_at(const int64_t* addr, char* dst, int64_t n, int64_t width, int64_t dst_stride);

}  // namespace fastsample
