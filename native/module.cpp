// Python binding of the native kernels: checks shapes, releases the GIL, nothing else.
// Every array argument is .noconvert(): an array of another dtype or layout is refused
// (TypeError), never silently copied on each call. The dtype policy (which index dtypes
// a graph has, converted once when it is built) lives in Python: fastsample/data/graph.py,
// and the wrappers in fastsample/sampling/, fastsample/model.py, fastsample/distributed/.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <omp.h>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "activation.hpp"
#include "aggregate.hpp"
#include "attention.hpp"
#include "fused_sample.hpp"
#include "kept_bits.hpp"
#include "node_map.hpp"
#include "row_adam.hpp"
#include "route.hpp"
#include "rows.hpp"
#include "typed_block.hpp"

namespace nb = nanobind;
using namespace fastsample;

template <typename T>
using In = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T>
nb::object to_numpy(Buffer<T>& buf) {
  T* data = buf.data.release();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {static_cast<size_t>(buf.size)}, owner));
}

// The kernels' view of the optional arguments: types None or empty is an untyped graph
// (null), excluded None is none (null, 0).
template <typename Id, typename T>
const T* edge_types(const std::optional<In<T>>& types, const In<Id>& indices, int64_t num_types,
                    int64_t entries) {
  const bool given = types && types->shape(0) > 0;
  if (given && types->shape(0) != indices.shape(0)) throw nb::value_error("types: one per entry of indices");
  if (!given && num_types != 1 && indices.shape(0) > 0)
    throw nb::value_error("types: an untyped graph (no types) has num_types 1");
  if (num_types < 1 || entries % num_types != 0) throw nb::value_error("fanouts and keys: a multiple of num_types entries each");
  return given ? types->data() : nullptr;
}

template <typename Id, typename Off, typename T>
nb::list sample_fused_(In<Off> indptr, In<Id> indices, std::optional<In<T>> types, In<Id> seeds, In<int64_t> fanouts,
                       In<uint64_t> keys, int64_t num_types, std::optional<In<int64_t>> excluded) {
  if (keys.shape(0) != fanouts.shape(0)) throw nb::value_error("fanouts and keys: as many of each");
  const T* t = edge_types<Id>(types, indices, num_types, fanouts.shape(0));
  std::vector<int64_t> f(fanouts.data(), fanouts.data() + fanouts.shape(0));
  std::vector<uint64_t> k(keys.data(), keys.data() + keys.shape(0));
  std::vector<LayerMFG<Id, T>> layers;
  {
    nb::gil_scoped_release release;
    layers = fused_sample<Id, Off, T>(indptr.data(), indices.data(), t, indptr.shape(0) - 1, seeds.data(),
                                      seeds.shape(0), f, k, num_types, excluded ? excluded->data() : nullptr,
                                      excluded ? excluded->shape(0) : 0);
  }
  nb::list out;
  for (auto& l : layers)
    out.append(nb::make_tuple(to_numpy(l.indptr), to_numpy(l.indices), to_numpy(l.src_ids), l.num_dst,
                              to_numpy(l.edge_types)));
  return out;
}

template <typename Id, typename Off, typename T>
nb::tuple sample_neighbors_(In<Off> indptr, In<Id> indices, std::optional<In<T>> types, In<Id> dst,
                            In<int64_t> fanouts, In<uint64_t> keys, int64_t num_types, int64_t row_offset,
                            std::optional<In<int64_t>> excluded) {
  if (keys.shape(0) != fanouts.shape(0) || static_cast<int64_t>(fanouts.shape(0)) != num_types)
    throw nb::value_error("fanouts and keys: num_types entries each");
  const T* t = edge_types<Id>(types, indices, num_types, fanouts.shape(0));
  Picks<Id, T> picks;
  {
    nb::gil_scoped_release release;
    picks = sample_neighbors<Id, Off, T>(indptr.data(), indices.data(), t, dst.data(), dst.shape(0), fanouts.data(),
                                         keys.data(), num_types, row_offset, excluded ? excluded->data() : nullptr,
                                         excluded ? excluded->shape(0) : 0);
  }
  return nb::make_tuple(to_numpy(picks.indptr), to_numpy(picks.picked), to_numpy(picks.types));
}

// Each graph dtype triple a CSCGraph can hold (graph.py: int32 or int64 ids, offsets at
// least as wide; uint8 or int16 edge types). An untyped graph passes types=None (or an
// empty array) and takes the first overload that fits its ids.
template <typename Id, typename Off, typename T>
void def_sampling(nb::module_& m) {
  m.def("sample_fused", &sample_fused_<Id, Off, T>, nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(),
        nb::arg("types").noconvert().none(), nb::arg("seeds").noconvert(), nb::arg("fanouts").noconvert(),
        nb::arg("keys").noconvert(), nb::arg("num_types"), nb::arg("excluded").noconvert() = nb::none(),
        "sample_fused(indptr, indices, types, seeds, fanouts, keys, num_types, excluded=None) -> [(indptr, indices, "
        "src_ids, num_dst, edge_types)] for layers L-1..0 (top first). types: each in-edge's type (None or empty: "
        "untyped, num_types 1, and edge_types come back empty); fanouts and keys: (layers x num_types) flat; "
        "excluded: sorted int64 positions in indices no layer picks. Inputs are validated by "
        "fastsample.sampling.sample.");
  m.def("sample_neighbors", &sample_neighbors_<Id, Off, T>, nb::arg("indptr").noconvert(),
        nb::arg("indices").noconvert(), nb::arg("types").noconvert().none(), nb::arg("dst").noconvert(),
        nb::arg("fanouts").noconvert(), nb::arg("keys").noconvert(), nb::arg("num_types"), nb::arg("row_offset"),
        nb::arg("excluded").noconvert() = nb::none(),
        "sample_neighbors(indptr, indices, types, dst, fanouts, keys, num_types, row_offset, excluded=None) -> "
        "(mfg indptr, picked global ids, their edge types (empty if untyped)): the choice rule for node dst[i] on "
        "row dst[i] - row_offset, without relabelling; fanouts and keys: one per edge type; excluded: sorted int64 "
        "positions in indices never picked.");
}

using Rows = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using ConstRows = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
// 16-bit rows (float16 or bfloat16 bits, viewed as uint16 by the caller)
using Rows16 = nb::ndarray<uint16_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using ConstRows16 = nb::ndarray<const uint16_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
// Row-strided views (a column block of a wider matrix); elements within a row contiguous.
using ConstVec = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Kept = nb::ndarray<uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;  // kept_bits.hpp
using ConstKept = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Vec = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using ConstStridedRows = nb::ndarray<const float, nb::ndim<2>, nb::device::cpu>;
using StridedRows = nb::ndarray<float, nb::ndim<2>, nb::device::cpu>;
using StridedRows16 = nb::ndarray<uint16_t, nb::ndim<2>, nb::device::cpu>;  // bfloat16 bits

// A kernel's view of float32 or bfloat16 (uint16) output rows, `stride` elements apart
template <typename O>
OutRows out_rows(O& out, int64_t stride) {
  if constexpr (std::is_same_v<typename O::Scalar, float>) return {out.data(), nullptr, stride};
  else return {nullptr, out.data(), stride};
}

// kept bits (kept_bits.hpp) for `rows` rows of `width` elements, else a ValueError naming `name`
template <typename K>
void check_kept(const K& kept, size_t rows, size_t width, const char* name) {
  if (kept.shape(0) != rows || static_cast<int64_t>(kept.shape(1)) != kept_bytes(static_cast<int64_t>(width)))
    throw nb::value_error((std::string(name) + ": (rows, (width + 7) / 8) uint8, the kept bits of each row").c_str());
}

template <typename A>
int64_t row_stride(const A& a, const char* name) {
  if (a.shape(0) == 0) return static_cast<int64_t>(a.shape(1));  // no rows (numpy gives it zero strides)
  if (a.shape(1) > 1 && a.stride(1) != 1) throw nb::value_error((std::string(name) + ": rows must be contiguous").c_str());
  if (a.shape(0) > 1 && a.stride(0) < static_cast<int64_t>(a.shape(1)))
    throw nb::value_error((std::string(name) + ": rows overlap").c_str());
  return a.shape(0) > 1 ? a.stride(0) : static_cast<int64_t>(a.shape(1));
}
template <typename H, typename O>
void check_aggregate(const In<int64_t>& indptr, const H& h, const O& out) {
  const bool with_self = out.shape(1) == 2 * h.shape(1);
  if (!with_self && out.shape(1) != h.shape(1)) throw nb::value_error("out: width must be h's or twice h's");
  if (static_cast<int64_t>(out.shape(0)) != indptr.shape(0) - 1) throw nb::value_error("out: one row per destination");
  if (with_self && h.shape(0) < out.shape(0)) throw nb::value_error("h: fewer sources than destinations");
}

// gat_aggregate's shapes: xs (num_src, width), a_src (num_src, heads), a_dst (num_dst,
// heads), the output (num_dst, heads x width if shared, else width); sources in range is the caller's
void check_attention(const In<int64_t>& indptr, const In<int32_t>& indices, const ConstRows& xs,
                     const ConstRows& a_src, const ConstRows& a_dst, bool shared, size_t out_rows,
                     size_t out_width, int64_t num_dst) {
  if (num_dst < 0) throw nb::value_error("indptr: empty");
  if (indptr.data()[num_dst] != static_cast<int64_t>(indices.shape(0)))
    throw nb::value_error("indices: indptr[-1] entries");
  const size_t heads = a_src.shape(1);
  if (heads == 0 || (!shared && xs.shape(1) % heads != 0))
    throw nb::value_error("xs: width a multiple of a_src's heads");
  if (a_src.shape(0) != xs.shape(0)) throw nb::value_error("a_src: one row per row of xs");
  if (a_dst.shape(0) != static_cast<size_t>(num_dst) || a_dst.shape(1) != heads)
    throw nb::value_error("a_dst: (destinations, heads)");
  if (out_rows != static_cast<size_t>(num_dst) || out_width != (shared ? heads : 1) * xs.shape(1))
    throw nb::value_error("out/g: (destinations, heads x xs's width if shared, else xs's width)");
}

template <typename T>
void copy_rows_(nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu> src, In<int64_t> src_rows,
                nb::ndarray<T, nb::ndim<2>, nb::c_contig, nb::device::cpu> dst, std::optional<In<int64_t>> dst_rows) {
  if (src.shape(1) != dst.shape(1)) throw nb::value_error("src and dst: different row widths");
  if (dst_rows && dst_rows->shape(0) != src_rows.shape(0)) throw nb::value_error("dst_rows: one per src_rows");
  if (!dst_rows && dst.shape(0) < src_rows.shape(0)) throw nb::value_error("dst: fewer rows than src_rows");
  nb::gil_scoped_release release;
  copy_rows(reinterpret_cast<const char*>(src.data()), src_rows.data(), reinterpret_cast<char*>(dst.data()),
            dst_rows ? dst_rows->data() : nullptr, src_rows.shape(0), src.shape(1) * sizeof(T));
}

template <typename T>
using Out = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename Id>
int64_t locate_runs_(In<Id> ids, In<int64_t> runs, Out<int32_t> run, Out<int64_t> rows) {
  if (runs.shape(0) < 2) throw nb::value_error("runs: at least 2 boundaries");
  if (run.shape(0) != ids.shape(0) || rows.shape(0) != ids.shape(0)) throw nb::value_error("run, rows: one per id");
  for (size_t k = 1; k < runs.shape(0); ++k)
    if (runs.data()[k] < runs.data()[k - 1]) throw nb::value_error("runs: ascending");
  nb::gil_scoped_release release;
  return locate_runs(ids.data(), ids.shape(0), runs.data(), static_cast<int64_t>(runs.shape(0)) - 1, run.data(),
                     rows.data());
}

template <typename Id>
int64_t route_ids_(In<Id> ids, In<int64_t> runs, int64_t num_types, int64_t rank, In<int64_t> row_bytes,
                   Out<int32_t> run, Out<int64_t> rows, Out<int8_t> types, Out<int64_t> index, Out<int64_t> counts,
                   Out<int8_t> which, Out<int64_t> offset) {
  const size_t n = ids.shape(0);
  if (num_types < 1 || num_types > 127) throw nb::value_error("num_types: 1 to 127");
  if ((runs.shape(0) - 1) % num_types != 0 || runs.shape(0) < 2)
    throw nb::value_error("runs: ranks x num_types + 1 boundaries");
  const int64_t num_ranks = (static_cast<int64_t>(runs.shape(0)) - 1) / num_types;
  if (rank < 0 || rank >= num_ranks) throw nb::value_error("rank: outside the runs' ranks");
  for (size_t k = 1; k < runs.shape(0); ++k)
    if (runs.data()[k] < runs.data()[k - 1]) throw nb::value_error("runs: ascending");
  if (static_cast<int64_t>(row_bytes.shape(0)) != num_types || static_cast<int64_t>(counts.shape(0)) != num_types)
    throw nb::value_error("row_bytes, counts: one per node type");
  for (size_t a : {run.shape(0), rows.shape(0), types.shape(0), index.shape(0), which.shape(0), offset.shape(0)})
    if (a != n) throw nb::value_error("run, rows, types, index, which, offset: one per id");
  nb::gil_scoped_release release;
  return route_ids(ids.data(), n, runs.data(), num_types, num_ranks, rank, row_bytes.data(), run.data(), rows.data(),
                   types.data(), index.data(), counts.data(), which.data(), offset.data());
}

template <typename S>
void positions_by_type_(In<S> types, int64_t num_types, Out<int64_t> pos, Out<int64_t> counts) {
  if (pos.shape(0) != types.shape(0)) throw nb::value_error("pos: one per entry of types");
  if (num_types < 1 || static_cast<int64_t>(counts.shape(0)) != num_types)
    throw nb::value_error("counts: num_types (>= 1) entries");
  bool ok;
  {
    nb::gil_scoped_release release;
    ok = positions_by_type(types.data(), types.shape(0), num_types, pos.data(), counts.data());
  }
  if (!ok) throw nb::value_error("types: a type outside [0, num_types)");
}

template <typename T>
void split_relations_(In<int64_t> indptr, In<int32_t> indices, In<T> edge_types, In<int64_t> src_pos,
                      In<int64_t> rel_num_dst, In<int64_t> indptr_at, Out<int64_t> indices_at, Out<int64_t> rel_indptr,
                      Out<int32_t> rel_indices) {
  const int64_t num_dst = static_cast<int64_t>(indptr.shape(0)) - 1, R = rel_num_dst.shape(0);
  if (num_dst < 0 || indptr.data()[num_dst] != static_cast<int64_t>(indices.shape(0)))
    throw nb::value_error("indptr: indptr[-1] entries of indices");
  if (edge_types.shape(0) != indices.shape(0)) throw nb::value_error("edge_types: one per entry of indices");
  if (static_cast<int64_t>(src_pos.shape(0)) < num_dst) throw nb::value_error("src_pos: fewer sources than destinations");
  if (static_cast<int64_t>(indptr_at.shape(0)) != R || static_cast<int64_t>(indices_at.shape(0)) != R + 1)
    throw nb::value_error("indptr_at: one per relation; indices_at: one more");
  for (int64_t r = 0; r < R; ++r)
    if (indptr_at.data()[r] < 0 || indptr_at.data()[r] + rel_num_dst.data()[r] + 1 > static_cast<int64_t>(rel_indptr.shape(0)))
      throw nb::value_error("rel_indptr: too short for the relations' destinations");
  if (rel_indices.shape(0) != indices.shape(0)) throw nb::value_error("rel_indices: one per entry of indices");
  bool ok;
  {
    nb::gil_scoped_release release;
    ok = split_relations(indptr.data(), indices.data(), edge_types.data(), num_dst, src_pos.shape(0), src_pos.data(),
                         R, rel_num_dst.data(), indptr_at.data(), indices_at.data(), rel_indptr.data(),
                         rel_indices.data());
  }
  if (!ok) throw nb::value_error("the MFG does not fit the relations' counts (an edge's relation, source or destination)");
}

// The forward mean kernels, into out rows of type O (float32, or bfloat16 bits as uint16).
template <typename O>
void def_aggregate(nb::module_& m) {
  m.def("mean_aggregate",
        [](In<int64_t> indptr, In<int32_t> indices, ConstRows h, O out) {
          check_aggregate(indptr, h, out);
          const int64_t stride = row_stride(out, "out");
          nb::gil_scoped_release release;
          mean_aggregate(indptr.data(), indices.data(), indptr.shape(0) - 1, h.data(), h.shape(1), out_rows(out, stride),
                         out.shape(1) == 2 * h.shape(1));
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("h").noconvert(),
        nb::arg("out").noconvert(),
        "out[i] = mean of h[indices[indptr[i]:indptr[i+1]]] (0 without edges); if out is twice "
        "h's width, out[i] = [h[i] | mean]; out's rows may be apart (a column block); out float32, or bfloat16 "
        "bits as uint16 (summed in fp32, rounded as torch rounds); see aggregate.cpp");
  m.def("mean_aggregate_half",
        [](In<int64_t> indptr, In<int32_t> indices, ConstRows16 h, O out, bool bf16) {
          check_aggregate(indptr, h, out);
          const int64_t stride = row_stride(out, "out");
          nb::gil_scoped_release release;
          mean_aggregate_half(indptr.data(), indices.data(), indptr.shape(0) - 1, h.data(), h.shape(1), out_rows(out, stride),
                              out.shape(1) == 2 * h.shape(1), bf16);
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("h").noconvert(),
        nb::arg("out").noconvert(), nb::arg("bf16"),
        "mean_aggregate over 16-bit rows h (bfloat16 bits if bf16, else float16, as uint16), summed in fp32");
  m.def("mean_aggregate_at",
        [](In<int64_t> indptr, In<int32_t> indices, In<int64_t> addr, int kind, O out, bool with_self,
           std::optional<In<float>> col_scale) {
          if (kind < 0 || kind > 3) throw nb::value_error("kind: 0 (float32), 1 (bfloat16), 2 (float16) or 3 (int8)");
          if (static_cast<int64_t>(out.shape(0)) != indptr.shape(0) - 1)
            throw nb::value_error("out: one row per destination");
          if (with_self && (out.shape(1) % 2 != 0 || addr.shape(0) < out.shape(0)))
            throw nb::value_error("with_self: out twice the rows' width, and a row per destination");
          const int64_t width = with_self ? out.shape(1) / 2 : out.shape(1);
          if ((kind == 3) != col_scale.has_value() || (col_scale && static_cast<int64_t>(col_scale->shape(0)) != width))
            throw nb::value_error("col_scale: one per column for int8 rows (kind 3), and only for them");
          const int64_t stride = row_stride(out, "out");
          nb::gil_scoped_release release;
          mean_aggregate_at(indptr.data(), indices.data(), indptr.shape(0) - 1, addr.data(), static_cast<RowKind>(kind),
                            width, out_rows(out, stride), with_self, col_scale ? col_scale->data() : nullptr);
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("addr").noconvert(), nb::arg("kind"),
        nb::arg("out").noconvert(), nb::arg("with_self"), nb::arg("col_scale").noconvert().none() = nb::none(),
        "mean_aggregate over rows found through an address table: source u's row starts at addr[u] "
        "(kind: 0 float32, 1 bfloat16, 2 float16, 3 int8 with col_scale, its columns' power-of-two scales; "
        "out's width, halved if with_self); the addresses are the caller's to keep valid (fastsample/rows.py)");
  m.def("decode_rows_at",
        [](In<int64_t> addr, In<float> col_scale, O out) {
          if (out.shape(0) != addr.shape(0)) throw nb::value_error("out: one row per address");
          if (col_scale.shape(0) != out.shape(1)) throw nb::value_error("col_scale: one per column of out");
          const int64_t stride = row_stride(out, "out");
          nb::gil_scoped_release release;
          decode_rows_at(addr.data(), addr.shape(0), out.shape(1), col_scale.data(), out_rows(out, stride));
        },
        nb::arg("addr").noconvert(), nb::arg("col_scale").noconvert(), nb::arg("out").noconvert(),
        "out[i] = the int8 row at addr[i] times col_scale (exact for power-of-two scales); out float32 or "
        "bfloat16 bits, its rows may be apart (a column block)");
}

// copy_rows_at into rows of T (float32, or 16-bit bits) that may be a column block of a wider matrix
template <typename T>
void def_copy_rows_at(nb::module_& m) {
  m.def("copy_rows_at",
        [](In<int64_t> addr, nb::ndarray<T, nb::ndim<2>, nb::device::cpu> dst) {
          if (dst.shape(0) != addr.shape(0)) throw nb::value_error("dst: one row per address");
          if (dst.shape(0) > 1 && (dst.stride(1) != 1 || dst.stride(0) < static_cast<int64_t>(dst.shape(1))))
            throw nb::value_error("dst: rows of contiguous elements (a column block of a row-major matrix)");
          nb::gil_scoped_release release;
          copy_rows_at(addr.data(), reinterpret_cast<char*>(dst.data()), addr.shape(0), dst.shape(1) * sizeof(T),
                       dst.stride(0) * static_cast<int64_t>(sizeof(T)));
        },
        nb::arg("addr").noconvert(), nb::arg("dst").noconvert(),
        "the same into float32 (or 16-bit) rows that may be a column block of a wider matrix (row stride >= width)");
}

NB_MODULE(_native, m) {
  m.doc() = "fastsample C++/OpenMP kernels";
  m.def("max_threads", []() { return omp_get_max_threads(); },
        "OpenMP's thread count for the next parallel region (OMP_NUM_THREADS).");
  m.def("set_num_threads", [](int n) { omp_set_num_threads(n); }, nb::arg("n"));
  m.def("node_map_direct_limit", [](int64_t n) { return n < 0 ? direct_map_nodes.load() : direct_map_nodes.exchange(n); },
        nb::arg("n") = -1,
        "The largest graph (nodes) whose sampler map is a direct array (8 B per node); above it, a hash "
        "table sized by the batch (native/node_map.hpp). n >= 0 sets it; returns the previous value.");
  m.def("wide_sums", &wide_sums, nb::arg("allow") = -1,
        "Whether the forward means sum in AVX-512 registers (native/aggregate.cpp; else the portable "
        "loops, the same bits). allow 0 forbids them from now on, 1 permits them where the CPU has "
        "AVX-512BW/VL; returns whether they were used before the call.");
  def_sampling<int32_t, int32_t, uint8_t>(m);
  def_sampling<int32_t, int64_t, uint8_t>(m);
  def_sampling<int64_t, int64_t, uint8_t>(m);
  def_sampling<int32_t, int32_t, int16_t>(m);
  def_sampling<int32_t, int64_t, int16_t>(m);
  def_sampling<int64_t, int64_t, int16_t>(m);

  def_aggregate<StridedRows>(m);
  def_aggregate<StridedRows16>(m);
  m.def("mean_aggregate_backward",
        [](In<int64_t> indptr, In<int32_t> indices, ConstStridedRows grad_agg, std::optional<ConstStridedRows> grad_self,
           std::optional<ConstKept> kept, float scale, Rows grad_h, std::optional<Vec> col_sum, bool transposed,
           bool accumulate, std::optional<Rows> grad_t, bool activation_blocks) {
          if (transposed && accumulate) throw nb::value_error("accumulate: not with transposed");
          if (grad_t && (transposed || grad_t->shape(0) != grad_h.shape(1) || grad_t->shape(1) != grad_h.shape(0)))
            throw nb::value_error("grad_t: grad_h's transpose, with grad_h not transposed");
          const int64_t agg_stride = row_stride(grad_agg, "grad_agg");
          const int64_t self_stride = grad_self ? row_stride(*grad_self, "grad_self") : 0;
          const int64_t num_src = grad_h.shape(transposed ? 1 : 0), width = grad_h.shape(transposed ? 0 : 1);
          if (col_sum && static_cast<int64_t>(col_sum->shape(0)) != width)
            throw nb::value_error("col_sum: one entry per column of grad_h");
          if (kept) check_kept(*kept, num_src, width, "kept");
          nb::gil_scoped_release release;
          mean_aggregate_backward(indptr.data(), indices.data(), indptr.shape(0) - 1, num_src,
                                  grad_agg.data(), agg_stride, grad_self ? grad_self->data() : nullptr,
                                  self_stride, width, kept ? kept->data() : nullptr, scale,
                                  grad_h.data(), col_sum ? col_sum->data() : nullptr, transposed, accumulate,
                                  grad_t ? grad_t->data() : nullptr, activation_blocks);
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("grad_agg").noconvert(),
        nb::arg("grad_self").noconvert().none(),
        nb::arg("kept").noconvert().none(), nb::arg("scale"), nb::arg("grad_h").noconvert(),
        nb::arg("col_sum").noconvert().none() = nb::none(), nb::arg("transposed") = false,
        nb::arg("accumulate") = false, nb::arg("grad_t").noconvert().none() = nb::none(),
        nb::arg("activation_blocks") = false,
        "grad_h = A^T grad_agg (+ grad_self on the first rows), zero where not kept (kept bits, if "
        "given) and scaled; col_sum, if given, = grad_h's column sums (fixed order); transposed: grad_h is "
        "(width, sources), the same values; accumulate: grad_h's values are added to, not replaced (the "
        "first term); grad_t, if given: grad_h's rows also written transposed there; activation_blocks: "
        "col_sum summed in relu_dropout_backward's blocks (its bits); see aggregate.cpp");
  m.def("gat_aggregate",
        [](In<int64_t> indptr, In<int32_t> indices, ConstRows xs, ConstRows a_src, ConstRows a_dst, bool shared,
           float slope, Rows out, Rows alpha) {
          const int64_t num_dst = indptr.shape(0) - 1, heads = a_src.shape(1);
          check_attention(indptr, indices, xs, a_src, a_dst, shared, out.shape(0), out.shape(1), num_dst);
          if (alpha.shape(0) != indices.shape(0) || static_cast<int64_t>(alpha.shape(1)) != heads)
            throw nb::value_error("alpha: (edges, heads)");
          nb::gil_scoped_release release;
          gat_aggregate(indptr.data(), indices.data(), num_dst, xs.data(), xs.shape(1), a_src.data(), a_dst.data(),
                        heads, shared, slope, out.data(), alpha.data());
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("xs").noconvert(),
        nb::arg("a_src").noconvert(), nb::arg("a_dst").noconvert(), nb::arg("shared"), nb::arg("slope"),
        nb::arg("out").noconvert(), nb::arg("alpha").noconvert(),
        "out[v] = sum over v's edges of softmax(leaky_relu(a_src[u] + a_dst[v])) xs[u], per head (each head "
        "the whole row if shared, else its slice); the attention written to alpha (edges, heads); see attention.cpp");
  m.def("gat_aggregate_backward",
        [](In<int64_t> indptr, In<int32_t> indices, ConstRows xs, ConstRows a_src, ConstRows a_dst, ConstRows alpha,
           ConstRows g, bool shared, float slope, Rows grad_xs, Rows grad_a_src, Rows grad_a_dst) {
          const int64_t num_dst = indptr.shape(0) - 1, heads = a_src.shape(1);
          check_attention(indptr, indices, xs, a_src, a_dst, shared, g.shape(0), g.shape(1), num_dst);
          if (alpha.shape(0) != indices.shape(0) || static_cast<int64_t>(alpha.shape(1)) != heads)
            throw nb::value_error("alpha: (edges, heads)");
          if (grad_xs.shape(0) != xs.shape(0) || grad_xs.shape(1) != xs.shape(1))
            throw nb::value_error("grad_xs: xs's shape");
          if (grad_a_src.shape(0) != a_src.shape(0) || grad_a_src.shape(1) != a_src.shape(1))
            throw nb::value_error("grad_a_src: a_src's shape");
          if (grad_a_dst.shape(0) != a_dst.shape(0) || grad_a_dst.shape(1) != a_dst.shape(1))
            throw nb::value_error("grad_a_dst: a_dst's shape");
          nb::gil_scoped_release release;
          gat_aggregate_backward(indptr.data(), indices.data(), num_dst, xs.shape(0), xs.data(), xs.shape(1),
                                 a_src.data(), a_dst.data(), alpha.data(), g.data(), heads, shared, slope,
                                 grad_xs.data(), grad_a_src.data(), grad_a_dst.data());
        },
        nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(), nb::arg("xs").noconvert(),
        nb::arg("a_src").noconvert(), nb::arg("a_dst").noconvert(), nb::arg("alpha").noconvert(),
        nb::arg("g").noconvert(), nb::arg("shared"), nb::arg("slope"), nb::arg("grad_xs").noconvert(),
        nb::arg("grad_a_src").noconvert(), nb::arg("grad_a_dst").noconvert(),
        "the gradients of gat_aggregate's xs, a_src and a_dst given g = dL/dout (fixed order); see attention.cpp");
  m.def("bias_relu_dropout",
        [](Rows x, ConstVec bias, double p, uint64_t seed, std::optional<Kept> kept) {
          if (bias.shape(0) != x.shape(1)) throw nb::value_error("bias: one entry per column of x");
          if (kept) check_kept(*kept, x.shape(0), x.shape(1), "kept");
          nb::gil_scoped_release release;
          bias_relu_dropout(x.data(), x.shape(0), x.shape(1), bias.data(), p, seed, kept ? kept->data() : nullptr);
        },
        nb::arg("x").noconvert(), nb::arg("bias").noconvert(), nb::arg("p"), nb::arg("seed"),
        nb::arg("kept").noconvert().none() = nb::none(),
        "x = dropout(relu(x + bias)) in place, keep bits a hash of (seed, element); kept, if given, = "
        "which outputs are kept (> 0), one bit each, for the backward; see activation.cpp");
  m.def("dropout_mask",
        [](Rows mask, double p, uint64_t seed) {
          nb::gil_scoped_release release;
          dropout_mask(mask.data(), static_cast<int64_t>(mask.shape(0) * mask.shape(1)), p, seed);
        },
        nb::arg("mask").noconvert(), nb::arg("p"), nb::arg("seed"),
        "mask = 1/(1-p) where relu_dropout keeps an element, else 0 (same seed, same draws)");
  m.def("relu_dropout_backward",
        [](ConstRows g, ConstKept kept, float scale, std::optional<Rows> grad, std::optional<Rows> grad_t,
           std::optional<Vec> col_sum) {
          const size_t rows = g.shape(0), width = g.shape(1);
          if (!grad && !grad_t) throw nb::value_error("grad, grad_t: at least one");
          if (grad && (grad->shape(0) != rows || grad->shape(1) != width)) throw nb::value_error("grad: g's shape");
          if (grad_t && (grad_t->shape(0) != width || grad_t->shape(1) != rows))
            throw nb::value_error("grad_t: g's shape transposed");
          if (col_sum && col_sum->shape(0) != width) throw nb::value_error("col_sum: one entry per column of g");
          check_kept(kept, rows, width, "kept");
          nb::gil_scoped_release release;
          relu_dropout_backward(g.data(), kept.data(), scale, rows, width, grad ? grad->data() : nullptr,
                                grad_t ? grad_t->data() : nullptr, col_sum ? col_sum->data() : nullptr);
        },
        nb::arg("g").noconvert(), nb::arg("kept").noconvert(), nb::arg("scale"),
        nb::arg("grad").noconvert().none(), nb::arg("grad_t").noconvert().none() = nb::none(),
        nb::arg("col_sum").noconvert().none() = nb::none(),
        "g * scale where kept, else 0: dropout(relu(.))'s backward from its output's kept bits, into grad "
        "and/or grad_t (transposed); col_sum, if given, = its column sums; see activation.cpp");
  m.def("adam_rows",
        [](nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu> table,
           nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu> m,
           nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu> v, In<int64_t> rows,
           In<int64_t> value_addr, In<int64_t> order,
           In<int64_t> starts, float divisor, float one_minus_beta1, float one_minus_beta2, float eps, float neg_step) {
          const int64_t n = rows.shape(0), dim = table.shape(1), num_rows = table.shape(0);
          if (m.shape(0) != table.shape(0) || m.shape(1) != table.shape(1) || v.shape(0) != table.shape(0) ||
              v.shape(1) != table.shape(1))
            throw nb::value_error("m, v: the table's shape");
          if (value_addr.shape(0) != static_cast<size_t>(n))
            throw nb::value_error("value_addr: one address per entry of rows");
          if (order.shape(0) != static_cast<size_t>(n) || starts.shape(0) < 1 || starts.data()[0] != 0 ||
              starts.data()[starts.shape(0) - 1] != n)
            throw nb::value_error("order: a permutation of the rows' entries; starts: its runs, from 0 to len(rows)");
          for (int64_t k = 0; k < n; ++k)
            if (order.data()[k] < 0 || order.data()[k] >= n || rows.data()[k] < 0 || rows.data()[k] >= num_rows)
              throw nb::value_error("order or rows: out of range");
          for (size_t s = 1; s < starts.shape(0); ++s)
            if (starts.data()[s] <= starts.data()[s - 1]) throw nb::value_error("starts: increasing");
          nb::gil_scoped_release release;
          adam_rows(table.data(), m.data(), v.data(), dim, rows.data(), value_addr.data(), order.data(), starts.data(),
                    static_cast<int64_t>(starts.shape(0)) - 1, divisor, one_minus_beta1, one_minus_beta2, eps,
                    neg_step);
        },
        nb::arg("table").noconvert(), nb::arg("m").noconvert(), nb::arg("v").noconvert(),
        nb::arg("rows").noconvert(), nb::arg("value_addr").noconvert(), nb::arg("order").noconvert(),
        nb::arg("starts").noconvert(), nb::arg("divisor"), nb::arg("one_minus_beta1"),
        nb::arg("one_minus_beta2"), nb::arg("eps"), nb::arg("neg_step"),
        "SparseAdam's step on the table rows rows[order[starts[s]]], each the sum of its runs' value rows in "
        "order, arrival k's at address value_addr[k] (the table's width of float32; the caller's, valid) "
        "(row_adam.hpp), in place");
  m.def("copy_rows_at",
        [](In<int64_t> addr, nb::ndarray<uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> dst) {
          if (dst.shape(0) != addr.shape(0)) throw nb::value_error("dst: one row per address");
          nb::gil_scoped_release release;
          copy_rows_at(addr.data(), reinterpret_cast<char*>(dst.data()), addr.shape(0), dst.shape(1), dst.shape(1));
        },
        nb::arg("addr").noconvert(), nb::arg("dst").noconvert(),
        "dst[i] = the dst.shape[1] bytes at address addr[i] (a row table's rows into one matrix)");
  def_copy_rows_at<float>(m);
  def_copy_rows_at<uint16_t>(m);
  m.def("copy_rows", &copy_rows_<float>, nb::arg("src").noconvert(), nb::arg("src_rows").noconvert(),
        nb::arg("dst").noconvert(), nb::arg("dst_rows").noconvert().none() = nb::none(),
        "dst[dst_rows[i] (or i)] = src[src_rows[i]]; row ids are not checked (the caller's are in range)");
  m.def("copy_rows", &copy_rows_<uint16_t>, nb::arg("src").noconvert(), nb::arg("src_rows").noconvert(),
        nb::arg("dst").noconvert(), nb::arg("dst_rows").noconvert().none() = nb::none(),
        "the same for 16-bit rows (float16 or bfloat16 bits as uint16)");
  m.def("copy_rows", &copy_rows_<int8_t>, nb::arg("src").noconvert(), nb::arg("src_rows").noconvert(),
        nb::arg("dst").noconvert(), nb::arg("dst_rows").noconvert().none() = nb::none(),
        "the same for int8 rows");
  const char* locate_doc = "run[i], rows[i] = the run of ids[i] (runs[r] <= id < runs[r + 1]) and its row in it; "
                           "returns the first i outside [runs[0], runs[-1]), or -1 (route.hpp)";
  m.def("locate_runs", &locate_runs_<int32_t>, nb::arg("ids").noconvert(), nb::arg("runs").noconvert(),
        nb::arg("run").noconvert(), nb::arg("rows").noconvert(), locate_doc);
  m.def("locate_runs", &locate_runs_<int64_t>, nb::arg("ids").noconvert(), nb::arg("runs").noconvert(),
        nb::arg("run").noconvert(), nb::arg("rows").noconvert(), locate_doc);
  const char* route_doc = "locate_runs, and each id's node type, position among its type's ids (counts per type), "
                          "source (0 own, 2 remote) and byte offset in its owner's shard; returns the first id "
                          "outside the runs, or -1 (route.hpp)";
  m.def("route_ids", &route_ids_<int32_t>, nb::arg("ids").noconvert(), nb::arg("runs").noconvert(),
        nb::arg("num_types"), nb::arg("rank"), nb::arg("row_bytes").noconvert(), nb::arg("run").noconvert(),
        nb::arg("rows").noconvert(), nb::arg("types").noconvert(), nb::arg("index").noconvert(),
        nb::arg("counts").noconvert(), nb::arg("which").noconvert(), nb::arg("offset").noconvert(), route_doc);
  m.def("route_ids", &route_ids_<int64_t>, nb::arg("ids").noconvert(), nb::arg("runs").noconvert(),
        nb::arg("num_types"), nb::arg("rank"), nb::arg("row_bytes").noconvert(), nb::arg("run").noconvert(),
        nb::arg("rows").noconvert(), nb::arg("types").noconvert(), nb::arg("index").noconvert(),
        nb::arg("counts").noconvert(), nb::arg("which").noconvert(), nb::arg("offset").noconvert(), route_doc);
  m.def("place_rows",
        [](In<int64_t> order, In<int8_t> types, In<int64_t> index, In<int64_t> counts, In<int64_t> row_bytes,
           Out<int64_t> offset,
           In<int8_t> which, std::optional<Out<int8_t>> which_out, std::optional<Out<int64_t>> offset_out) {
          const size_t n = types.shape(0);
          if (index.shape(0) != n || offset.shape(0) != n || which.shape(0) != n)
            throw nb::value_error("types, index, offset, which: one per id");
          if (order.shape(0) > n) throw nb::value_error("order: more entries than ids");
          if (counts.shape(0) != row_bytes.shape(0)) throw nb::value_error("counts, row_bytes: one per node type");
          if (which_out.has_value() != offset_out.has_value() ||
              (which_out && (which_out->shape(0) != n || offset_out->shape(0) != n)))
            throw nb::value_error("which_out, offset_out: both or neither, one per id");
          bool ok;
          {
            nb::gil_scoped_release release;
            ok = place_rows(order.data(), order.shape(0), types.data(), index.data(), counts.data(), row_bytes.data(),
                            row_bytes.shape(0), n, offset.data(), which.data(),
                            which_out ? which_out->data() : nullptr, offset_out ? offset_out->data() : nullptr);
          }
          if (!ok) throw nb::value_error("order, types or index: an entry out of range");
        },
        nb::arg("order").noconvert(), nb::arg("types").noconvert(), nb::arg("index").noconvert(),
        nb::arg("counts").noconvert(), nb::arg("row_bytes").noconvert(), nb::arg("offset").noconvert(),
        nb::arg("which").noconvert(),
        nb::arg("which_out").noconvert().none() = nb::none(), nb::arg("offset_out").noconvert().none() = nb::none(),
        "offset[order[k]] = the received rows' byte offsets, back to back; then which/offset by type into the "
        "outputs when given, type t's counts[t] entries at their index (route.hpp)");
  m.def("group_by_run",
        [](In<int32_t> run, std::optional<In<uint8_t>> keep, Out<int64_t> order, Out<int64_t> counts) {
          if (keep && keep->shape(0) != run.shape(0)) throw nb::value_error("keep: one per entry of run");
          if (order.shape(0) < run.shape(0) + 1) throw nb::value_error("order: len(run) + 1 entries");
          int64_t got;
          {
            nb::gil_scoped_release release;
            got = group_by_run(run.data(), keep ? keep->data() : nullptr, run.shape(0), counts.shape(0), order.data(),
                               counts.data());
          }
          if (got < 0) throw nb::value_error("run: an entry outside [0, len(counts))");
          return got;
        },
        nb::arg("run").noconvert(), nb::arg("keep").noconvert().none(), nb::arg("order").noconvert(),
        nb::arg("counts").noconvert(),
        "order[:k] = the positions with keep (all: None) grouped by run, stable (order: len(run) + 1 entries, the "
        "last scratch); counts[r] per run; returns k");
  m.def("row_addresses",
        [](std::optional<In<int8_t>> which, In<int64_t> offset, In<int64_t> bases, In<int64_t> sizes,
           int64_t row_bytes, int64_t align, Out<int64_t> addr) {
          if (which && which->shape(0) != offset.shape(0)) throw nb::value_error("which: one per offset");
          if (addr.shape(0) != offset.shape(0)) throw nb::value_error("addr: one per offset");
          if (bases.shape(0) != sizes.shape(0)) throw nb::value_error("bases, sizes: one per source");
          if (align < 1) throw nb::value_error("align: >= 1");
          bool aligned = false;
          int64_t bad;
          {
            nb::gil_scoped_release release;
            bad = row_addresses(which ? which->data() : nullptr, offset.data(), offset.shape(0), bases.data(),
                                sizes.data(), sizes.shape(0), row_bytes, align, addr.data(), &aligned);
          }
          return nb::make_tuple(bad, aligned);
        },
        nb::arg("which").noconvert().none(), nb::arg("offset").noconvert(), nb::arg("bases").noconvert(),
        nb::arg("sizes").noconvert(), nb::arg("row_bytes"), nb::arg("align"), nb::arg("addr").noconvert(),
        "addr = bases[which] + offset (which None: source 0); returns (the first row not inside its source (sizes "
        "in bytes) or -1, whether every address is a multiple of align) (route.hpp)");
  const char* positions_doc = "pos[i] = entries of types[:i] of type types[i]; counts[t] = entries of type t";
  m.def("positions_by_type", &positions_by_type_<int8_t>, nb::arg("types").noconvert(), nb::arg("num_types"),
        nb::arg("pos").noconvert(), nb::arg("counts").noconvert(), positions_doc);
  m.def("positions_by_type", &positions_by_type_<int64_t>, nb::arg("types").noconvert(), nb::arg("num_types"),
        nb::arg("pos").noconvert(), nb::arg("counts").noconvert(), positions_doc);
  const char* split_doc = "a typed MFG's edges as one CSC per relation, positions within the node types; see typed_block.hpp";
  m.def("split_relations", &split_relations_<uint8_t>, nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(),
        nb::arg("edge_types").noconvert(), nb::arg("src_pos").noconvert(), nb::arg("rel_num_dst").noconvert(),
        nb::arg("indptr_at").noconvert(), nb::arg("indices_at").noconvert(), nb::arg("rel_indptr").noconvert(),
        nb::arg("rel_indices").noconvert(), split_doc);
  m.def("split_relations", &split_relations_<int16_t>, nb::arg("indptr").noconvert(), nb::arg("indices").noconvert(),
        nb::arg("edge_types").noconvert(), nb::arg("src_pos").noconvert(), nb::arg("rel_num_dst").noconvert(),
        nb::arg("indptr_at").noconvert(), nb::arg("indices_at").noconvert(), nb::arg("rel_indptr").noconvert(),
        nb::arg("rel_indices").noconvert(), split_doc);
}
