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

// locate_runs and more in the same pass, for a gather by rank `rank` of num_ranks over
// num_types node types (run r: type r % num_types of rank r / num_types; num_types <= 127):
// each id's node type, its position among the ids of its type (index; counts[t]: ids of
// type t), where its row is (which: 0 this rank's shard, 2 another rank's) and its byte
// offset in its owner's shard (offset = row * row_bytes[type]). Returns the position of
// the first id outside [runs[0], runs[num_ranks * num_types]) (the rest unwritten), or -1.
template <typename Id>
int64_t route_ids(const Id* ids, int64_t n, const int64_t* runs, int64_t num_types, int64_t num_ranks, int64_t rank,
                  const int64_t* row_bytes, int32_t* run, int64_t* rows, int8_t* types, int64_t* index,
                  int64_t* counts, int8_t* which, int64_t* offset);

// The received rows' places: the entries order[0..m) (positions among n) get offsets back
// to back in that order, each row_bytes[types[i]] long; then, unless which_out is null,
// which and offset are written by type (type t's counts[t] entries from the counts of the
// types before it, each at index[i]). Returns false (partly written) on an entry out of
// range or counts that do not add up to n.
bool place_rows(const int64_t* order, int64_t m, const int8_t* types, const int64_t* index, const int64_t* counts,
                const int64_t* row_bytes, int64_t num_types, int64_t n, int64_t* offset, const int8_t* which,
                int8_t* which_out, int64_t* offset_out);

// The positions i < n with keep[i] != 0 (all of them when keep is null) grouped by
// run[i], runs ascending, in position order within a run (a stable counting sort: the
// runs are few); counts[r]: how many are in run r. order has n + 1 slots (the last one is
// scratch). Returns how many were written to order, or -1 (nothing written) if a run[i] is
// outside [0, num_runs).
int64_t group_by_run(const int32_t* run, const uint8_t* keep, int64_t n, int64_t num_runs, int64_t* order,
                     int64_t* counts);

// A row table's addresses (fastsample/rows.py): addr[i] = bases[which[i]] + offset[i]
// (source 0 when which is null), each row's row_bytes checked to lie inside its source
// (sizes[s] bytes); *aligned: every address a multiple of align (the element size the
// kernels read). Returns the first i whose row is not inside its source (the rest
// unwritten), or -1.
int64_t row_addresses(const int8_t* which, const int64_t* offset, int64_t n, const int64_t* bases,
                      const int64_t* sizes, int64_t num_sources, int64_t row_bytes, int64_t align, int64_t* addr,
                      bool* aligned);

}  // namespace fastsample
