// GraphSAGE mean aggregation over an MFG in CSC form, forward and backward.
//
// Forward: one pass over indptr/indices, parallel over destinations; each destination
// sums its sources' rows (contiguous, vectorised over the feature width) and scales. The
// rows are random reads: the next rows are prefetched a few edges ahead.
// Backward: the gradient flows to sources, so the MFG is transposed first (counting
// sort by source, O(E), edges kept in destination order), then the same row-parallel
// gather runs over it, adding the self term and applying the ReLU/dropout mask in the
// same pass. No atomics and a fixed summation order: results do not depend on the thread
// count. Memory touched: the inputs, the outputs, and the transpose (O(E)).
#include "aggregate.hpp"
#include "clones.hpp"
#include "column_sums.hpp"
#include "kept_bits.hpp"
#include "prefetch.hpp"
#include "transpose.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fastsample {
namespace {

std::atomic<bool> wide_sums_allowed{true};  // wide_sums(0): the portable loops, for the tests

constexpr int64_t kAhead = 16;  // edges prefetched ahead: covers ~a memory latency of row sums
// A row table's address entries are random reads too (8 B of a table of MBs, beyond L2): each
// is fetched this many edges ahead, so that its row's prefetch kAhead edges ahead has it
// (hetero-medium's input layer, one core, Zen 3: 66 -> 55 ms a step).
constexpr int64_t kAheadAddress = 48;
// output rows written ahead of time: the rows a product's input is made of are far apart in
// memory (a column block of it), and each would otherwise wait on its lines before the first sum
constexpr int64_t kAheadRows = 2;
constexpr int64_t kSumRows = 256;  // rows per partial column sum in the backward (a thread's unit of work)

// 16-bit rows are widened as they are read and summed in fp32.
struct Bf16 {  // bfloat16: the high half of a float
  static float load(uint16_t v) {
    uint32_t bits = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

struct Fp16 {  // IEEE half, without branches (so the loops vectorise): see below
  static float load(uint16_t v) {
    // Exponent and mantissa moved to a float's positions read as a float are the value
    // scaled by 2^-112 (the bias gap, 127 - 15): one multiply rescales normals and
    // subnormals alike. Infinities and NaNs (exponent all ones) get float's all-ones exponent.
    const uint32_t body = static_cast<uint32_t>(v & 0x7fffu) << 13;
    float f;
    std::memcpy(&f, &body, sizeof f);
    f *= 5.192296858534828e33f;  // 2^112
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits |= (body >= 0x0f800000u) ? 0x7f800000u : 0u;
    bits |= static_cast<uint32_t>(v & 0x8000u) << 16;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

struct F32 {
  static float load(float v) { return v; }
};

struct I8 {  // int8 rows: integers, exact in fp32; their column scale is applied after the sum
  static float load(int8_t v) { return static_cast<float>(v); }
};

// Where the sources' rows are: one matrix (h, width wide), or a table of each row's
// address (rows read where they landed: a feature shard, a cache, a receive buffer;
// fastsample/rows.py), so an input layer reads them without a copy into one matrix first.
template <typename T>
struct Dense {
  using Value = T;
  const T* h;
  int64_t width;
  const T* row(int64_t i) const { return h + i * width; }
  void prefetch_address(int64_t) const {}
};

template <typename T>
struct Table {
  using Value = T;
  const int64_t* addr;
  const T* row(int64_t i) const { return reinterpret_cast<const T*>(addr[i]); }
  void prefetch_address(int64_t i) const { __builtin_prefetch(addr + i); }
};

// The rows edge j's successors read: the address entry kAheadAddress edges ahead (a table's),
// the row kAhead edges ahead. One policy for the portable loops and the AVX-512 sums.
template <typename Src>
[[gnu::always_inline]] inline void prefetch_edges_ahead(const int32_t* indices, int64_t j, int64_t num_edges,
                                                        const Src& src, int64_t width) {
  if (j + kAheadAddress < num_edges) src.prefetch_address(indices[j + kAheadAddress]);
  if (j + kAhead < num_edges) prefetch_lines(src.row(indices[j + kAhead]), width);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define FS_SUMS_512 1
// The sum over a destination's edges with the columns held in AVX-512 registers across
// the edges, where the clones' portable loops load and store the output row once per edge
// (and GCC's avx512f clone widens int8 through ymm halves): 8 registers, 128 columns, a
// pass over the edges each. The same additions in the same order (0, then each source's
// row in edge order, then the column scale and 1 / degree as separate products), so the
// same bits as mean_row's loops. Needs AVX-512BW/VL (the masked byte and word loads):
// checked once at run time; F32, I8 and Bf16 rows only (Fp16 keeps the portable loops).
#define FS_TARGET_512 gnu::target("avx512f,avx512bw,avx512vl")

inline bool cpu_sums_512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

inline bool sums_512() { return cpu_sums_512() && wide_sums_allowed.load(std::memory_order_relaxed); }

template <typename Load>
struct Wide;  // 16 elements at p (the masked-out ones read as 0, never touched) as floats
template <>
struct Wide<F32> {
  [[FS_TARGET_512]] static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
template <>
struct Wide<I8> {
  [[FS_TARGET_512]] static __m512 load(const int8_t* p, __mmask16 m) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
  }
};
template <>
struct Wide<Bf16> {
  [[FS_TARGET_512]] static __m512 load(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

// Columns [c, c + 16 NV) of the mean (the last register's lanes masked to `tail`) into o.
template <typename Load, int NV, typename Src>
[[FS_TARGET_512]] void mean_columns_512(const int32_t* indices, int64_t begin, int64_t end, int64_t num_edges,
                                        const Src& src, int64_t width, int64_t c, __mmask16 tail, float* o,
                                        const float* col_scale) {
  __m512 acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t j = begin; j < end; ++j) {
    if (c == 0) prefetch_edges_ahead(indices, j, num_edges, src, width);  // later passes find the rows in L1
    const typename Src::Value* row = src.row(indices[j]) + c;
    for (int k = 0; k < NV; ++k)
      acc[k] = _mm512_add_ps(acc[k], Wide<Load>::load(row + 16 * k, k == NV - 1 ? tail : __mmask16(0xffff)));
  }
  const __m512 degree = _mm512_set1_ps(end > begin ? 1.0f / static_cast<float>(end - begin) : 1.0f);
  for (int k = 0; k < NV; ++k) {
    const __mmask16 m = k == NV - 1 ? tail : __mmask16(0xffff);
    if (col_scale != nullptr) acc[k] = _mm512_mul_ps(acc[k], _mm512_maskz_loadu_ps(m, col_scale + c + 16 * k));
    if (end > begin) acc[k] = _mm512_mul_ps(acc[k], degree);
    _mm512_mask_storeu_ps(o + c + 16 * k, m, acc[k]);
  }
}

template <typename Load, typename Src>
[[FS_TARGET_512]] void mean_sum_512(const int32_t* indices, int64_t begin, int64_t end, int64_t num_edges,
                                    const Src& src, int64_t width, float* o, const float* col_scale) {
  for (int64_t c = 0; c < width; c += 128) {
    const int64_t n = std::min<int64_t>(128, width - c);
    const __mmask16 tail = static_cast<__mmask16>(n % 16 == 0 ? 0xffff : (1u << (n % 16)) - 1);
    switch ((n + 15) / 16) {
#define FS_CASE(NV) \
  case NV:          \
    mean_columns_512<Load, NV>(indices, begin, end, num_edges, src, width, c, tail, o, col_scale); break;
      FS_CASE(1) FS_CASE(2) FS_CASE(3) FS_CASE(4) FS_CASE(5) FS_CASE(6) FS_CASE(7) FS_CASE(8)
#undef FS_CASE
    }
  }
}
#endif

// Destination i's row of the output. Inlined into each FS_CLONES function, whose own
// `omp parallel for` calls it: an OpenMP region inside a shared helper would be outlined
// once, for the baseline ISA, and lose the clones' vector width.
// col_scale (int8 rows only, else null): each column's scale, a power of two, applied to the
// self row and to the sum (exact: the same bits as summing the decoded rows).
template <typename Load, typename Src>
[[gnu::always_inline]] inline void mean_row(const int64_t* indptr, const int32_t* indices, int64_t num_edges,
                                            const Src& src, int64_t width, float* o, bool with_self, int64_t i,
                                            const float* col_scale) {
  if (with_self) {
    const typename Src::Value* self = src.row(i);
#pragma omp simd
    for (int64_t f = 0; f < width; ++f) o[f] = Load::load(self[f]);
    if (col_scale != nullptr) {
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) o[f] *= col_scale[f];
    }
    o += width;
  }
  const int64_t begin = indptr[i], end = indptr[i + 1];
#ifdef FS_SUMS_512
  if constexpr (!std::is_same_v<Load, Fp16>) {
    if (sums_512()) return mean_sum_512<Load>(indices, begin, end, num_edges, src, width, o, col_scale);
  }
#endif
  std::fill(o, o + width, 0.0f);
  for (int64_t j = begin; j < end; ++j) {
    prefetch_edges_ahead(indices, j, num_edges, src, width);
    const typename Src::Value* row = src.row(indices[j]);
#pragma omp simd
    for (int64_t f = 0; f < width; ++f) o[f] += Load::load(row[f]);
  }
  if (col_scale != nullptr) {
#pragma omp simd
    for (int64_t f = 0; f < width; ++f) o[f] *= col_scale[f];
  }
  if (end > begin) {
    const float scale = 1.0f / static_cast<float>(end - begin);
#pragma omp simd
    for (int64_t f = 0; f < width; ++f) o[f] *= scale;
  }
}

// The rows a product's bf16 operand is made of, written so directly (no fp32 matrix then a
// conversion pass): rounded to nearest even as torch rounds float to bfloat16, so the same
// bits as the conversion after (NaN aside: written 0x7fc0, as c10's scalar path; torch's
// vector path writes 0xffff).
[[gnu::always_inline]] inline void store_bf16(const float* in, uint16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t f = 0; f < n; ++f) {
    uint32_t u;
    std::memcpy(&u, in + f, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out[f] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
  }
}

// Destination i's output row: made in place in fp32, or in `scratch` (a row of the thread's)
// and then stored as bf16.
template <typename Load, typename Src>
[[gnu::always_inline]] inline void mean_out(const int64_t* indptr, const int32_t* indices, int64_t num_edges,
                                            const Src& src, int64_t width, const OutRows& out, bool with_self,
                                            int64_t i, int64_t num_dst, float* scratch,
                                            const float* col_scale = nullptr) {
  float* o = out.bf16 != nullptr ? scratch : out.f32 + i * out.stride;
  // a later destination's row, about to be written: its lines owned by then; and its own
  // row, read first (a random row too: destinations are sources read where they lie)
  if (i + kAheadRows < num_dst) {
    const int64_t n = with_self ? 2 * width : width;
    if (out.bf16 == nullptr) {
      prefetch_lines_for_write(out.f32 + (i + kAheadRows) * out.stride, n);
    } else {
      prefetch_lines_for_write(out.bf16 + (i + kAheadRows) * out.stride, n);
    }
    if (with_self) prefetch_lines(src.row(i + kAheadRows), width);
  }
  mean_row<Load>(indptr, indices, num_edges, src, width, o, with_self, i, col_scale);
  if (out.bf16 != nullptr) store_bf16(o, out.bf16 + i * out.stride, with_self ? 2 * width : width);
}

// A thread's scratch row for mean_out (bf16 output only): one per parallel region, not per row.
inline std::vector<float> scratch_row(const OutRows& out, int64_t width) {
  return std::vector<float>(out.bf16 != nullptr ? 2 * width : 0);
}

}  // namespace

bool wide_sums(int allow) {
#ifdef FS_SUMS_512
  const bool used = sums_512();
#else
  const bool used = false;
#endif
  if (allow >= 0) wide_sums_allowed.store(allow != 0);
  return used;
}

FS_CLONES void mean_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* h,
                              int64_t width, OutRows out, bool with_self) {
  const int64_t num_edges = indptr[num_dst];
#pragma omp parallel
  {
    std::vector<float> scratch = scratch_row(out, width);
#pragma omp for schedule(dynamic, 64)
    for (int64_t i = 0; i < num_dst; ++i)
      mean_out<F32>(indptr, indices, num_edges, Dense<float>{h, width}, width, out, with_self, i, num_dst, scratch.data());
  }
}

FS_CLONES void mean_aggregate_half(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const uint16_t* h,
                                   int64_t width, OutRows out, bool with_self, bool bf16) {
  const int64_t num_edges = indptr[num_dst];
#pragma omp parallel
  {
    std::vector<float> scratch = scratch_row(out, width);
    if (bf16) {
#pragma omp for schedule(dynamic, 64)
      for (int64_t i = 0; i < num_dst; ++i)
        mean_out<Bf16>(indptr, indices, num_edges, Dense<uint16_t>{h, width}, width, out, with_self, i, num_dst, scratch.data());
    } else {
#pragma omp for schedule(dynamic, 64)
      for (int64_t i = 0; i < num_dst; ++i)
        mean_out<Fp16>(indptr, indices, num_edges, Dense<uint16_t>{h, width}, width, out, with_self, i, num_dst, scratch.data());
    }
  }
}

FS_CLONES void mean_aggregate_at(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const int64_t* addr,
                                 RowKind kind, int64_t width, OutRows out, bool with_self, const float* col_scale) {
  const int64_t num_edges = indptr[num_dst];
#pragma omp parallel
  {
    std::vector<float> scratch = scratch_row(out, width);
    switch (kind) {
      case RowKind::kF32:
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < num_dst; ++i)
          mean_out<F32>(indptr, indices, num_edges, Table<float>{addr}, width, out, with_self, i, num_dst, scratch.data());
        break;
      case RowKind::kBf16:
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < num_dst; ++i)
          mean_out<Bf16>(indptr, indices, num_edges, Table<uint16_t>{addr}, width, out, with_self, i, num_dst, scratch.data());
        break;
      case RowKind::kF16:
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < num_dst; ++i)
          mean_out<Fp16>(indptr, indices, num_edges, Table<uint16_t>{addr}, width, out, with_self, i, num_dst, scratch.data());
        break;
      case RowKind::kI8:
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < num_dst; ++i)
          mean_out<I8>(indptr, indices, num_edges, Table<int8_t>{addr}, width, out, with_self, i, num_dst, scratch.data(),
                       col_scale);
        break;
    }
  }
}

FS_CLONES void decode_rows_at(const int64_t* addr, int64_t n, int64_t width, const float* col_scale, OutRows out) {
#pragma omp parallel
  {
    std::vector<float> scratch = scratch_row(out, width);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      if (i + kAhead < n) {
        prefetch_lines(reinterpret_cast<const int8_t*>(addr[i + kAhead]), width);
        if (out.bf16 == nullptr) prefetch_lines_for_write(out.f32 + (i + kAhead) * out.stride, width);
      }
      const int8_t* q = reinterpret_cast<const int8_t*>(addr[i]);
      float* o = out.bf16 != nullptr ? scratch.data() : out.f32 + i * out.stride;
#pragma omp simd
      for (int64_t f = 0; f < width; ++f) o[f] = static_cast<float>(q[f]) * col_scale[f];
      if (out.bf16 != nullptr) store_bf16(o, out.bf16 + i * out.stride, width);
    }
  }
}

FS_CLONES void mean_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst,
                             int64_t num_src, const float* grad_agg, int64_t agg_stride,
                             const float* grad_self, int64_t self_stride, int64_t width, const uint8_t* kept, float scale,
                             float* grad_h, float* col_sum, bool transposed, bool accumulate, float* grad_t,
                             bool activation_blocks) {
  const int64_t E = indptr[num_dst];
  // transpose: for each source, the destinations it feeds, in destination order
  std::vector<int64_t> tptr(num_src + 1, 0);
  for (int64_t e = 0; e < E; ++e) ++tptr[indices[e] + 1];
  for (int64_t u = 0; u < num_src; ++u) tptr[u + 1] += tptr[u];
  std::vector<int32_t> tdst(E);
  std::vector<int64_t> pos(tptr.begin(), tptr.end() - 1);
  for (int64_t i = 0; i < num_dst; ++i)
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) tdst[pos[indices[e]]++] = static_cast<int32_t>(i);
  std::vector<float> inv(num_dst);
  for (int64_t i = 0; i < num_dst; ++i) {
    const int64_t d = indptr[i + 1] - indptr[i];
    inv[i] = d ? 1.0f / static_cast<float>(d) : 0.0f;
  }
  // a block of rows is a thread's unit of work and one partial column sum
  const int64_t block_rows = activation_blocks ? activation_block_rows(width) : kSumRows;
  const int64_t blocks = (num_src + block_rows - 1) / block_rows;
  ColumnSums sums(blocks, width, col_sum != nullptr);
#pragma omp parallel
  {
    // transposed: a block's rows are made in a tile (in cache), then written as columns
    std::vector<float> tile(transposed ? block_rows * width : 0), scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * block_rows, last = std::min(num_src, (b + 1) * block_rows);
      for (int64_t u = first; u < last; ++u) {
        float* g = transposed ? tile.data() + (u - first) * width : grad_h + u * width;
        if (accumulate) {
          if (grad_self != nullptr && u < num_dst) {
            const float* s = grad_self + u * self_stride;
#pragma omp simd
            for (int64_t f = 0; f < width; ++f) g[f] += s[f];
          }
        } else if (grad_self != nullptr && u < num_dst) {
          std::copy(grad_self + u * self_stride, grad_self + u * self_stride + width, g);
        } else {
          std::fill(g, g + width, 0.0f);
        }
        for (int64_t k = tptr[u]; k < tptr[u + 1]; ++k) {
          const int32_t i = tdst[k];
          // ahead across sources too: most have an edge or two, so a source's own list is too short to prefetch in
          if (k + kAhead < E) prefetch_lines(grad_agg + static_cast<int64_t>(tdst[k + kAhead]) * agg_stride, width);
          const float* row = grad_agg + static_cast<int64_t>(i) * agg_stride;
          const float s = inv[i];
#pragma omp simd
          for (int64_t f = 0; f < width; ++f) g[f] += s * row[f];
        }
        if (kept != nullptr) apply_kept(g, kept + u * kept_bytes(width), width, scale, g);
        if (col_sum != nullptr) sums.add(b, g);
      }
      if (transposed) write_transposed(tile.data(), width, last - first, width, grad_h + first, num_src, scratch);
      if (grad_t != nullptr)  // the block's rows, still in cache, also as columns
        write_transposed(grad_h + first * width, width, last - first, width, grad_t + first, num_src, scratch);
    }
  }
  if (col_sum != nullptr) sums.write(col_sum);
}

}  // namespace fastsample
