// GAT attention over an MFG in CSC form, forward and backward (see attention.hpp).
//
// Forward: parallel over destinations; a destination's scores, their softmax and the
// weighted sum of its sources' rows are one pass over its segment, so the per-edge
// scores never leave cache and no (E, H, C) message tensor exists (PyG's GATConv builds
// one: x_j gathered per edge, scaled, then scattered). Backward: the score gradients are
// again per destination; the source gradients go through the transpose of the MFG
// (counting sort by source, edges kept in destination order) as in aggregate.cpp.
#include "attention.hpp"
#include "clones.hpp"
#include "prefetch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fastsample {
namespace {

// Edges prefetched ahead (random rows, as in aggregate.cpp), across destinations (sources in
// the backward): a relation's segments are a few edges long, so one segment alone is too
// short to prefetch in and its first rows would each wait on memory.
constexpr int64_t kAhead = 8;

inline float leaky(float s, float slope) { return s > 0.0f ? s : s * slope; }

}  // namespace

FS_CLONES void gat_aggregate(const int64_t* indptr, const int32_t* indices, int64_t num_dst, const float* xs,
                             int64_t width, const float* a_src, const float* a_dst, int64_t heads, bool shared,
                             float slope, float* out, float* alpha) {
  const int64_t channels = shared ? width : width / heads, stride = shared ? 0 : channels;
  const int64_t out_width = heads * channels;
  const int64_t E = indptr[num_dst];
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t v = 0; v < num_dst; ++v) {
    const int64_t begin = indptr[v], end = indptr[v + 1];
    for (int64_t h = 0; h < heads; ++h) {
      const float ad = a_dst[v * heads + h];
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = begin; j < end; ++j) {
        if (h == 0 && j + kAhead < E) prefetch_lines(a_src + static_cast<int64_t>(indices[j + kAhead]) * heads, heads);
        const float e = leaky(a_src[static_cast<int64_t>(indices[j]) * heads + h] + ad, slope);
        alpha[j * heads + h] = e;
        m = std::max(m, e);
      }
      float sum = 0.0f;
      for (int64_t j = begin; j < end; ++j) {
        const float x = std::exp(alpha[j * heads + h] - m);
        alpha[j * heads + h] = x;
        sum += x;
      }
      sum += 1e-16f;
      for (int64_t j = begin; j < end; ++j) alpha[j * heads + h] /= sum;
    }
    float* o = out + v * out_width;
    std::fill(o, o + out_width, 0.0f);
    for (int64_t j = begin; j < end; ++j) {
      if (j + kAhead < E) prefetch_lines(xs + static_cast<int64_t>(indices[j + kAhead]) * width, width);
      const float* x = xs + static_cast<int64_t>(indices[j]) * width;
      for (int64_t h = 0; h < heads; ++h) {
        const float a = alpha[j * heads + h];
        float* oh = o + h * channels;
        const float* xh = x + h * stride;
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) oh[c] += a * xh[c];
      }
    }
  }
}

FS_CLONES void gat_aggregate_backward(const int64_t* indptr, const int32_t* indices, int64_t num_dst,
                                      int64_t num_src, const float* xs, int64_t width, const float* a_src,
                                      const float* a_dst, const float* alpha, const float* g, int64_t heads,
                                      bool shared, float slope, float* grad_xs, float* grad_a_src,
                                      float* grad_a_dst) {
  const int64_t channels = shared ? width : width / heads, stride = shared ? 0 : channels;
  const int64_t out_width = heads * channels;
  const int64_t E = indptr[num_dst];
  // the scores' gradients, per destination: d alpha_j = <g_v, xs_u> per head, through the
  // softmax (alpha_j (d alpha_j - sum_k alpha_k d alpha_k)) and the leaky ReLU
  std::vector<float> ge(E * heads);
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t v = 0; v < num_dst; ++v) {
    const int64_t begin = indptr[v], end = indptr[v + 1];
    const float* gv = g + v * out_width;
    for (int64_t j = begin; j < end; ++j) {
      if (j + kAhead < E) {
        const int64_t u = indices[j + kAhead];
        prefetch_lines(xs + u * width, width);
        prefetch_lines(a_src + u * heads, heads);  // read by the softmax's gradient below
      }
      const float* x = xs + static_cast<int64_t>(indices[j]) * width;
      for (int64_t h = 0; h < heads; ++h) {
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int64_t c = 0; c < channels; ++c) d += gv[h * channels + c] * x[h * stride + c];
        ge[j * heads + h] = d;
      }
    }
    for (int64_t h = 0; h < heads; ++h) {
      float s = 0.0f;
      for (int64_t j = begin; j < end; ++j) s += alpha[j * heads + h] * ge[j * heads + h];
      const float ad = a_dst[v * heads + h];
      float sd = 0.0f;
      for (int64_t j = begin; j < end; ++j) {
        const float pre = a_src[static_cast<int64_t>(indices[j]) * heads + h] + ad;
        const float d = alpha[j * heads + h] * (ge[j * heads + h] - s) * (pre > 0.0f ? 1.0f : slope);
        ge[j * heads + h] = d;
        sd += d;
      }
      grad_a_dst[v * heads + h] = sd;
    }
  }
  // transpose: for each source, its edges in destination order
  std::vector<int64_t> tptr(num_src + 1, 0);
  for (int64_t e = 0; e < E; ++e) ++tptr[indices[e] + 1];
  for (int64_t u = 0; u < num_src; ++u) tptr[u + 1] += tptr[u];
  std::vector<int64_t> tedge(E);
  std::vector<int32_t> tdst(E);
  {
    std::vector<int64_t> pos(tptr.begin(), tptr.end() - 1);
    for (int64_t v = 0; v < num_dst; ++v)
      for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {
        const int64_t k = pos[indices[e]]++;
        tedge[k] = e;
        tdst[k] = static_cast<int32_t>(v);
      }
  }
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t u = 0; u < num_src; ++u) {
    float* gx = grad_xs + u * width;
    float* gs = grad_a_src + u * heads;
    std::fill(gx, gx + width, 0.0f);
    std::fill(gs, gs + heads, 0.0f);
    for (int64_t k = tptr[u]; k < tptr[u + 1]; ++k) {
      if (k + kAhead < E) {
        prefetch_lines(g + static_cast<int64_t>(tdst[k + kAhead]) * out_width, out_width);
        prefetch_lines(alpha + tedge[k + kAhead] * heads, heads);
        prefetch_lines(ge.data() + tedge[k + kAhead] * heads, heads);
      }
      const int64_t e = tedge[k];
      const float* gv = g + static_cast<int64_t>(tdst[k]) * out_width;
      for (int64_t h = 0; h < heads; ++h) {
        const float a = alpha[e * heads + h];
        gs[h] += ge[e * heads + h];
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) gx[h * stride + c] += a * gv[h * channels + c];
      }
    }
  }
}

}  // namespace fastsample
