#pragma once
#include <cstdint>

namespace fastsample {

// SparseAdam's step on the rows of one embedding table, at their owner
// (fastsample/distributed/row_adam.py): for each run s of `order` (starts[s]..starts[s+1],
// the arrivals of one table row, in arrival order), the row's gradient is the sum of its
// arrivals' value rows in that order (arrival k's dim floats at address value_addr[k]:
// where they landed, no copy into one matrix), divided by `divisor`; then its moments m, v and
// the row itself move as SparseAdam moves them, in float32. Rows are distinct per run, so
// the runs are independent (any thread count gives the same bits).
void adam_rows(float* table, float* m, float* v, int64_t dim, const int64_t* rows, const int64_t* value_addr,
               const int64_t* order, const int64_t* starts, int64_t runs, float divisor, float one_minus_beta1,
               float one_minus_beta2, float eps, float neg_step);

}  // namespace fastsample
