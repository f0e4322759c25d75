#include "compute/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace dualpath::compute::kernels {
namespace {

constexpr int64_t kRowTile = 4;
constexpr int64_t kColTile = 16;
// Rows of x per outer block: 64 rows of a d=1024 model are 256 KiB, which stays in L2 while every
// column strip of w passes over it.
constexpr int64_t kRowBlock = 64;

// The 4 x 16 register tile: acc[r][c] += x[r][i] * w[i][c] over the whole `in` range.
inline void tile_4x16(const float* x, int64_t in, const float* w, int64_t out, float* y) {
  float acc[kRowTile][kColTile] = {};
  for (int64_t i = 0; i < in; ++i) {
    const float* wr = w + i * out;
    const float a0 = x[i], a1 = x[in + i], a2 = x[2 * in + i], a3 = x[3 * in + i];
    for (int64_t c = 0; c < kColTile; ++c) {
      const float wv = wr[c];
      acc[0][c] += a0 * wv;
      acc[1][c] += a1 * wv;
      acc[2][c] += a2 * wv;
      acc[3][c] += a3 * wv;
    }
  }
  for (int64_t r = 0; r < kRowTile; ++r) std::memcpy(y + r * out, acc[r], sizeof(acc[r]));
}

// Any rows x cols tile at the edges; the same summation order (i ascending) as the full tile, so
// a token's result does not depend on which tile it fell into.
inline void tile_edge(
    const float* x, int64_t rows, int64_t in, const float* w, int64_t out, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float acc[kColTile] = {};
    for (int64_t i = 0; i < in; ++i) {
      const float a = x[r * in + i];
      const float* wr = w + i * out;
      for (int64_t c = 0; c < cols; ++c) acc[c] += a * wr[c];
    }
    std::memcpy(y + r * out, acc, static_cast<size_t>(cols) * sizeof(float));
  }
}

}  // namespace

void matmul(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y) {
  for (int64_t b0 = 0; b0 < n; b0 += kRowBlock) {
    const int64_t b1 = std::min(n, b0 + kRowBlock);
    for (int64_t c0 = 0; c0 < out; c0 += kColTile) {
      const int64_t cols = std::min(kColTile, out - c0);
      int64_t r0 = b0;
      if (cols == kColTile) {
        for (; r0 + kRowTile <= b1; r0 += kRowTile) {
          tile_4x16(x + r0 * in, in, w + c0, out, y + r0 * out + c0);
        }
      }
      if (r0 < b1) tile_edge(x + r0 * in, b1 - r0, in, w + c0, out, cols, y + r0 * out + c0);
    }
  }
}

void rms_norm(const float* x, int64_t n, int64_t d, const float* gain, float eps, float* y) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * d;
    double ss = 0.0;  // double: the norm of a long residual row should not lose bits
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    float* yr = y + t * d;
    for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * gain[i];
  }
}

void rope(float* v,
          int64_t n,
          int heads,
          int head_dim,
          int64_t row_stride,
          const float* cos,
          const float* sin) {
  const int half = head_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int h = 0; h < heads; ++h) {
      float* a = v + t * row_stride + static_cast<int64_t>(h) * head_dim;
      float* b = a + half;
      for (int i = 0; i < half; ++i) {
        const float x0 = a[i], x1 = b[i];
        a[i] = x0 * c[i] - x1 * s[i];
        b[i] = x1 * c[i] + x0 * s[i];
      }
    }
  }
}

void exp_nonpositive(float* x, int64_t count) {
  // Cephes expf: e^x = 2^k * e^r with k = round(x / ln 2) and |r| <= ln2 / 2, e^r by a degree-6
  // polynomial. Rounding uses the 1.5 * 2^23 trick so the loop has no calls and vectorises.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  for (int64_t i = 0; i < count; ++i) {
    const float xv = std::max(x[i], -87.0f);
    const float kf = (xv * kLog2e + kRound) - kRound;
    const float r = (xv - kf * kLn2Hi) - kf * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;
    x[i] = p * std::bit_cast<float>(bits);
  }
}

void swiglu(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void attention(const AttentionArgs& a) {
  const int group = a.q_heads / a.kv_heads;
  const int64_t q_stride = static_cast<int64_t>(a.q_heads) * a.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  float* s = a.scores;
  for (int64_t t = 0; t < a.n; ++t) {
    const int64_t ctx = a.cached + t + 1;  // causal: the query sees itself and everything before
    for (int h = 0; h < a.q_heads; ++h) {
      const int g = h / group;
      const float* q = a.q + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
      const float* kt = a.kt + static_cast<int64_t>(g) * a.head_dim * a.ctx_stride;
      // scores[j] = q . k_j, dimension-major so the inner loop runs over contiguous keys.
      {
        const float qd = q[0] * scale;
        for (int64_t j = 0; j < ctx; ++j) s[j] = qd * kt[j];
      }
      for (int d = 1; d < a.head_dim; ++d) {
        const float qd = q[d] * scale;
        const float* kd = kt + d * a.ctx_stride;
        for (int64_t j = 0; j < ctx; ++j) s[j] += qd * kd[j];
      }
      float m = s[0];
      for (int64_t j = 1; j < ctx; ++j) m = std::max(m, s[j]);
      for (int64_t j = 0; j < ctx; ++j) s[j] -= m;
      exp_nonpositive(s, ctx);
      float sum = 0.0f;
      for (int64_t j = 0; j < ctx; ++j) sum += s[j];
      const float* v = a.v + static_cast<int64_t>(g) * a.ctx_stride * a.head_dim;
      float* o = a.out + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
      std::fill(o, o + a.head_dim, 0.0f);
      for (int64_t j = 0; j < ctx; ++j) {
        const float p = s[j];
        const float* vj = v + j * a.head_dim;
        for (int d = 0; d < a.head_dim; ++d) o[d] += p * vj[d];
      }
      const float inv = 1.0f / sum;
      for (int d = 0; d < a.head_dim; ++d) o[d] *= inv;
    }
  }
}

}  // namespace dualpath::compute::kernels
