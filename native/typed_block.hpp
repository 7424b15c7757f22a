#pragma once
#include <cstdint>

namespace fastsample {

// pos[i] = the number of j < i with types[j] == types[i]; counts[t] = entries of type t.
// Returns false (nothing meaningful written) if a type is outside [0, num_types).
template <typename S>
bool positions_by_type(const S* types, int64_t n, int64_t num_types, int64_t* pos, int64_t* counts);

// A typed MFG's edges split by relation (a Block's per-relation CSCs): relation r's CSC
// over the rel_num_dst[r] destinations of its destination type, at rel_indptr + indptr_at[r]
// (rel_num_dst[r] + 1 entries) and rel_indices[indices_at[r], indices_at[r + 1]) (its
// edges; the kernel fills indices_at, num_relations + 1 entries; rel_indices has one
// entry per edge), sources and
// destinations as positions within their node types (src_pos). Each relation's edges keep
// the MFG's order (by destination). Returns false if an edge's relation, its destination's
// position or its source (num_src) is out of range (the MFG does not fit the counts).
template <typename T>
bool split_relations(const int64_t* indptr, const int32_t* indices, const T* edge_types, int64_t num_dst,
                     int64_t num_src, const int64_t* src_pos, int64_t num_relations, const int64_t* rel_num_dst,
                     const int64_t* indptr_at, int64_t* indices_at, int64_t* rel_indptr,
                     int32_t* rel_indices);

}  // namespace fastsample
