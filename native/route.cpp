// The gather's bookkeeping, in single passes where numpy needs several: searchsorted
// over a handful of boundaries, a stable argsort of a key with a handful of values, and
// a masked min/max per row source made ~12 ms of numpy a step on hetero-medium's ~450k
// ids (2 ranks x 4 types).
#include "route.hpp"

#include <algorithm>
#include <vector>

namespace fastsample {

template <typename Id>
int64_t locate_runs(const Id* ids, int64_t n, const int64_t* runs, int64_t num_runs, int32_t* run, int64_t* rows) {
  const int64_t lo = runs[0], hi = runs[num_runs];
  const bool few = num_runs <= 32;  // few boundaries: count those at or below the id, no branches
  int64_t bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    int32_t r = -1;
    if (few) {
      for (int64_t k = 0; k <= num_runs; ++k) r += static_cast<int32_t>(runs[k] <= id);
    } else {
      r = static_cast<int32_t>(std::upper_bound(runs, runs + num_runs + 1, id) - runs) - 1;
    }
    run[i] = r;
    rows[i] = id - runs[std::max(r, 0)];
    if ((id < lo || id >= hi) && bad < 0) bad = i;
  }
  return bad;
}

template int64_t locate_runs<int32_t>(const int32_t*, int64_t, const int64_t*, int64_t, int32_t*, int64_t*);
template int64_t locate_runs<int64_t>(const int64_t*, int64_t, const int64_t*, int64_t, int32_t*, int64_t*);

int64_t group_by_run(const int32_t* run, const uint8_t* keep, int64_t n, int64_t num_runs, int64_t* order,
                     int64_t* counts) {
  // branch-free: which entries are kept is random (remote rows), so a branch on it mispredicts
  std::fill(counts, counts + num_runs, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (run[i] < 0 || run[i] >= num_runs) return -1;
    counts[run[i]] += keep == nullptr ? 1 : (keep[i] != 0);
  }
  std::vector<int64_t> next(num_runs);
  int64_t total = 0;
  for (int64_t r = 0; r < num_runs; ++r) {
    next[r] = total;
    total += counts[r];
  }
  // an entry not kept is written to the slot past the kept ones (order has n + 1 slots), then dropped
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = keep == nullptr ? 1 : (keep[i] != 0);
    int64_t& at = next[run[i]];
    order[k ? at : n] = i;
    at += k;
  }
  return total;
}

int64_t first_outside(const int8_t* which, const int64_t* offset, int64_t n, const int64_t* sizes,
                      int64_t num_sources, int64_t row_bytes) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = which != nullptr ? which[i] : 0;
    if (s < 0 || s >= num_sources || offset[i] < 0 || offset[i] + row_bytes > sizes[s]) return i;
  }
  return -1;
}

}  // namespace fastsample
