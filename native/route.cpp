// The gather's bookkeeping, in single passes where numpy needs several: searchsorted
// over a handful of boundaries, a stable argsort of a key with a handful of values, and
// a masked min/max per row source made ~12 ms of numpy a step on hetero-medium's ~450k
// ids (2 ranks x 4 types).
#include "route.hpp"

#include <algorithm>
#include <vector>

namespace fastsample {

namespace {

// The run of id: runs[r] <= id < runs[r + 1]; -1 below runs[0], num_runs at or above its end.
inline int32_t run_of(int64_t id, const int64_t* runs, int64_t num_runs) {
  if (num_runs <= 32) {  // few boundaries: count those at or below the id, no branches
    int32_t r = -1;
    for (int64_t k = 0; k <= num_runs; ++k) r += static_cast<int32_t>(runs[k] <= id);
    return r;
  }
  return static_cast<int32_t>(std::upper_bound(runs, runs + num_runs + 1, id) - runs) - 1;
}

}  // namespace

template <typename Id>
int64_t locate_runs(const Id* ids, int64_t n, const int64_t* runs, int64_t num_runs, int32_t* run, int64_t* rows) {
  const int64_t lo = runs[0], hi = runs[num_runs];
  int64_t bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    const int32_t r = run_of(id, runs, num_runs);
    run[i] = r;
    rows[i] = id - runs[std::max(r, 0)];
    if ((id < lo || id >= hi) && bad < 0) bad = i;
  }
  return bad;
}

template <typename Id>
int64_t route_ids(const Id* ids, int64_t n, const int64_t* runs, int64_t num_types, int64_t num_ranks, int64_t rank,
                  const int64_t* row_bytes, int32_t* run, int64_t* rows, int8_t* types, int64_t* index,
                  int64_t* counts, int8_t* which, int64_t* offset) {
  const int64_t num_runs = num_types * num_ranks, lo = runs[0], hi = runs[num_runs];
  std::vector<int8_t> run_type(num_runs), run_remote(num_runs);
  for (int64_t r = 0; r < num_runs; ++r) {
    run_type[r] = static_cast<int8_t>(r % num_types);
    run_remote[r] = static_cast<int8_t>(r / num_types != rank);
  }
  std::fill(counts, counts + num_types, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < lo || id >= hi) return i;
    const int32_t r = run_of(id, runs, num_runs);
    const int8_t t = run_type[r];
    run[i] = r;
    rows[i] = id - runs[r];
    types[i] = t;
    index[i] = counts[t]++;
    which[i] = static_cast<int8_t>(2 * run_remote[r]);
    offset[i] = rows[i] * row_bytes[t];
  }
  return -1;
}

bool place_rows(const int64_t* order, int64_t m, const int8_t* types, const int64_t* index, const int64_t* counts,
                const int64_t* row_bytes, int64_t num_types, int64_t n, int64_t* offset, const int8_t* which,
                int8_t* which_out, int64_t* offset_out) {
  int64_t at = 0;
  for (int64_t k = 0; k < m; ++k) {
    const int64_t i = order[k];
    if (i < 0 || i >= n || types[i] < 0 || types[i] >= num_types) return false;
    offset[i] = at;
    at += row_bytes[types[i]];
  }
  if (which_out == nullptr) return true;
  // by type: type t's entries from base[t], each at its position among them
  std::vector<int64_t> base(num_types + 1, 0);
  for (int64_t t = 0; t < num_types; ++t) base[t + 1] = base[t] + counts[t];
  if (base[num_types] != n) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = types[i];
    if (t < 0 || t >= num_types || index[i] < 0 || index[i] >= counts[t]) return false;
    const int64_t slot = base[t] + index[i];
    which_out[slot] = which[i];
    offset_out[slot] = offset[i];
  }
  return true;
}

template int64_t locate_runs<int32_t>(const int32_t*, int64_t, const int64_t*, int64_t, int32_t*, int64_t*);
template int64_t locate_runs<int64_t>(const int64_t*, int64_t, const int64_t*, int64_t, int32_t*, int64_t*);
template int64_t route_ids<int32_t>(const int32_t*, int64_t, const int64_t*, int64_t, int64_t, int64_t, const int64_t*,
                                    int32_t*, int64_t*, int8_t*, int64_t*, int64_t*, int8_t*, int64_t*);
template int64_t route_ids<int64_t>(const int64_t*, int64_t, const int64_t*, int64_t, int64_t, int64_t, const int64_t*,
                                    int32_t*, int64_t*, int8_t*, int64_t*, int64_t*, int8_t*, int64_t*);

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

int64_t row_addresses(const int8_t* which, const int64_t* offset, int64_t n, const int64_t* bases,
                      const int64_t* sizes, int64_t num_sources, int64_t row_bytes, int64_t align, int64_t* addr,
                      bool* aligned) {
  int64_t misaligned = 0;
  for (int64_t s = 0; s < num_sources; ++s) misaligned |= bases[s] % align;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = which != nullptr ? which[i] : 0;
    if (s < 0 || s >= num_sources || offset[i] < 0 || offset[i] + row_bytes > sizes[s]) return i;
    addr[i] = bases[s] + offset[i];
    misaligned |= offset[i] % align;
  }
  *aligned = misaligned == 0;
  return -1;
}

}  // namespace fastsample
