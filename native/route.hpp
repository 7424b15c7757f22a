#pragma once
#include <cstdint>

namespace fastsample {

// The feature gather's bookkeeping (fastsample/distributed/gather.py): where each
// gathered id lives, and the remote ones grouped by owner, in one pass each.

// For each of n ids, the run it falls in (runs[r] <= id < runs[r + 1]; runs ascending,
// num_runs + 1 boundaries, a run per rank and node type, empty runs allowed) and its row
// within the run. Returns the position of the first id outside [runs[0], runs[num_runs]),
// or -1.
template <typename Id>
int64_t locate_runs(const Id* ids, int64_t n, const int64_t* runs, int64_t num_runs, int32_t* run, int64_t* rows);

// The positions i < n with keep[i] != 0 (all of them when keep is null) grouped by
// run[i], runs ascending, in position order within a run (a stable counting sort: the
// runs are few); counts[r]: how many are in run r. order has n + 1 slots (the last one is
// scratch). Returns how many were written to order, or -1 (nothing written) if a run[i] is
// outside [0, num_runs).
int64_t group_by_run(const int32_t* run, const uint8_t* keep, int64_t n, int64_t num_runs, int64_t* order,
                     int64_t* counts);

// The first i whose bytes [offset[i], offset[i] + row_bytes) are not all inside source
// which[i] (0 when which is null; sizes[s]: source s's size in bytes), or -1.
int64_t first_outside(const int8_t* which, const int64_t* offset, int64_t n, const int64_t* sizes,
                      int64_t num_sources, int64_t row_bytes);

}  // namespace fastsample
