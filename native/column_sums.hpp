// Column sums of a matrix made a block of rows at a time, on any number of threads: one row of
// sums per block, in double (as good as exact; torch's pairwise fp32 sum, which they replace,
// is not), taken while each row is still in cache, then the blocks' rows added in block order,
// so the result does not depend on the thread count. A thread adds only to the blocks it makes.
#pragma once
#include <cstdint>
#include <vector>

namespace fastsample {

// The rows per block of relu_dropout_backward's column sums (~128 KiB of rows, in L2): a
// pass that takes its place (mean_aggregate_backward with activation_blocks) sums in the
// same blocks, so a bias gradient comes out with the same bits either way.
inline int64_t activation_block_rows(int64_t width) {
  const int64_t rows = 32768 / (width > 1 ? width : 1) / 16 * 16;
  return rows < 16 ? 16 : (rows > 256 ? 256 : rows);
}

class ColumnSums {
 public:
  // blocks x width sums, or nothing to keep (and nothing written) when not `wanted`
  ColumnSums(int64_t blocks, int64_t width, bool wanted)
      : blocks_(blocks), width_(width), partial_(wanted ? blocks * width : 0, 0.0) {}

  [[gnu::always_inline]] void add(int64_t block, const float* row) {
    double* p = partial_.data() + block * width_;
#pragma omp simd
    for (int64_t f = 0; f < width_; ++f) p[f] += static_cast<double>(row[f]);
  }

  // out (width) = the column sums, rounded to float
  void write(float* out) const {
    std::vector<double> total(width_, 0.0);
    for (int64_t b = 0; b < blocks_; ++b) {
      const double* p = partial_.data() + b * width_;
#pragma omp simd
      for (int64_t f = 0; f < width_; ++f) total[f] += p[f];
    }
    for (int64_t f = 0; f < width_; ++f) out[f] = static_cast<float>(total[f]);
  }

 private:
  int64_t blocks_, width_;
  std::vector<double> partial_;
};

}  // namespace fastsample
