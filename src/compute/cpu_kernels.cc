#include "compute/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace dualpath::compute::kernels {
namespace {

// The hot loops are compiled twice, for x86-64-v3 (AVX2) and the baseline, and picked at load
// time; the matmul has a third, AVX-512 variant (matmul_v4), picked at run time. -ffp-contract=off
// (CMakeLists.txt) keeps them bit-identical: no fused multiply-adds, and no loop here reassociates
// a sum, so the vector width never changes a result. (Allowing FMA measured +19 % prefill on tiny
// but gives AVX2 and older machines different bits.)
// DP_NO_TARGET_CLONES (TSan builds, cmake/warnings.cmake): the baseline only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(DP_NO_TARGET_CLONES)
#define DP_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DP_KERNEL
#endif

constexpr int64_t kRowTile = 4;
constexpr int64_t kColTile = 16;
// Rows of x per outer block: 64 rows of a d=1024 model are 256 KiB, which stays in L2 while every
// column strip of w passes over it.
constexpr int64_t kRowBlock = 64;
// Query tokens per attention block: with 4 query heads per KV head, 64 score rows of up to a few
// thousand keys stay in L2 between the QK and PV products.
constexpr int64_t kQueryBlock = 16;

// Eight floats as one value, through the GCC/Clang vector extension (lowered to two SSE registers
// in the baseline clone, one AVX register in the x86-64-v3 clone); aligned(4): loads from any
// float address.
using Vec8 = float __attribute__((vector_size(32), aligned(4)));

// The 4-row register tile over two vectors of columns (V = Vec8: 4 x 16; V = Vec16: 4 x 32):
// acc[r][c] += x[r][i] * w[i][c] over the whole `in` range, eight accumulators that stay in
// registers. Element for element the same operations, in the same order, as rows_streamed, for
// either vector width, so every variant gives the same bits. Inlined into its caller, which
// carries the target (x86-64-v4 for Vec16).
template <typename V>
[[gnu::always_inline]] inline void tile_4x2v(
    const float* x, int64_t ldx, int64_t in, const float* w, int64_t ldw, float* y, int64_t ldy) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
  for (int64_t i = 0; i < in; ++i) {
    const V w0 = *reinterpret_cast<const V*>(w + i * ldw);
    const V w1 = *reinterpret_cast<const V*>(w + i * ldw + kLanes);
    const float x0 = x[i], x1 = x[ldx + i], x2 = x[2 * ldx + i], x3 = x[3 * ldx + i];
    a00 += x0 * w0;
    a01 += x0 * w1;
    a10 += x1 * w0;
    a11 += x1 * w1;
    a20 += x2 * w0;
    a21 += x2 * w1;
    a30 += x3 * w0;
    a31 += x3 * w1;
  }
  *reinterpret_cast<V*>(y) = a00;
  *reinterpret_cast<V*>(y + kLanes) = a01;
  *reinterpret_cast<V*>(y + ldy) = a10;
  *reinterpret_cast<V*>(y + ldy + kLanes) = a11;
  *reinterpret_cast<V*>(y + 2 * ldy) = a20;
  *reinterpret_cast<V*>(y + 2 * ldy + kLanes) = a21;
  *reinterpret_cast<V*>(y + 3 * ldy) = a30;
  *reinterpret_cast<V*>(y + 3 * ldy + kLanes) = a31;
}

// Fewer than kRowTile rows (a decode step, the LM head of the last token, a block's leftover
// rows) or fewer than kColTile columns (the right edge): each row of w is streamed whole (y[r] +=
// x[r][i] * w[i]), which reads w contiguously instead of in 64-byte strips a page apart. Per output
// element the same sum, in the same order (i ascending from 0), as the tiles.
[[gnu::always_inline]] inline void rows_streamed(const float* x,
                                                 int64_t ldx,
                                                 int64_t rows,
                                                 int64_t in,
                                                 const float* w,
                                                 int64_t ldw,
                                                 int64_t out,
                                                 float* y,
                                                 int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * ldy;
    std::fill(yr, yr + out, 0.0f);
    for (int64_t i = 0; i < in; ++i) {
      const float a = x[r * ldx + i];
      const float* wr = w + i * ldw;
      for (int64_t c = 0; c < out; ++c) yr[c] += a * wr[c];
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// AVX-512: the tile with sixteen floats per register (4 x 32), the same element-wise operations
// as the 4 x 16 tile (so the same bits), twice the work per instruction.
using Vec16 = float __attribute__((vector_size(64), aligned(4)));

[[gnu::target("arch=x86-64-v4")]] void matmul_v4(const float* x,
                                                 int64_t ldx,
                                                 int64_t n,
                                                 int64_t in,
                                                 const float* w,
                                                 int64_t ldw,
                                                 int64_t out,
                                                 float* y,
                                                 int64_t ldy) {
  const int64_t tiled = n - n % kRowTile;
  for (int64_t b0 = 0; b0 < tiled; b0 += kRowBlock) {
    const int64_t b1 = std::min(tiled, b0 + kRowBlock);
    int64_t c0 = 0;
    for (; c0 + 2 * kColTile <= out; c0 += 2 * kColTile) {
      for (int64_t r0 = b0; r0 < b1; r0 += kRowTile) {
        tile_4x2v<Vec16>(x + r0 * ldx, ldx, in, w + c0, ldw, y + r0 * ldy + c0, ldy);
      }
    }
    for (; c0 < out; c0 += kColTile) {
      const int64_t cols = std::min(kColTile, out - c0);
      if (cols == kColTile) {
        for (int64_t r0 = b0; r0 < b1; r0 += kRowTile) {
          tile_4x2v<Vec8>(x + r0 * ldx, ldx, in, w + c0, ldw, y + r0 * ldy + c0, ldy);
        }
      } else {
        rows_streamed(x + b0 * ldx, ldx, b1 - b0, in, w + c0, ldw, cols, y + b0 * ldy + c0, ldy);
      }
    }
  }
  if (tiled < n) {
    rows_streamed(x + tiled * ldx, ldx, n - tiled, in, w, ldw, out, y + tiled * ldy, ldy);
  }
}

// Read once at start-up. __builtin_cpu_init first: this initialiser may run before libgcc's own.
const bool kHasAvx512 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}();
#else
constexpr bool kHasAvx512 = false;
void matmul_v4(
    const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t) {}
#endif

// y[n][out] = x[n][in] * w[in][out] with row strides ldx, ldw, ldy.
DP_KERNEL void matmul_strided(const float* x,
                              int64_t ldx,
                              int64_t n,
                              int64_t in,
                              const float* w,
                              int64_t ldw,
                              int64_t out,
                              float* y,
                              int64_t ldy) {
  if (kHasAvx512) return matmul_v4(x, ldx, n, in, w, ldw, out, y, ldy);
  const int64_t tiled = n - n % kRowTile;
  for (int64_t b0 = 0; b0 < tiled; b0 += kRowBlock) {
    const int64_t b1 = std::min(tiled, b0 + kRowBlock);
    for (int64_t c0 = 0; c0 < out; c0 += kColTile) {
      const int64_t cols = std::min(kColTile, out - c0);
      if (cols == kColTile) {
        for (int64_t r0 = b0; r0 < b1; r0 += kRowTile) {
          tile_4x2v<Vec8>(x + r0 * ldx, ldx, in, w + c0, ldw, y + r0 * ldy + c0, ldy);
        }
      } else {
        rows_streamed(x + b0 * ldx, ldx, b1 - b0, in, w + c0, ldw, cols, y + b0 * ldy + c0, ldy);
      }
    }
  }
  if (tiled < n)
    rows_streamed(x + tiled * ldx, ldx, n - tiled, in, w, ldw, out, y + tiled * ldy, ldy);
}

// Softmax numerators of one score row in place: e^(s - max) over [0, valid), zeros over
// [valid, width) (masked keys); returns the sum. Eight partial sums in a fixed order, so the loop
// vectorises and the result is the same at any vector width.
DP_KERNEL float softmax_row(float* s, int64_t valid, int64_t width) {
  constexpr int kLanes = 8;
  float m[kLanes];
  for (int k = 0; k < kLanes; ++k) m[k] = s[0];
  int64_t j = 0;
  for (; j + kLanes <= valid; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) m[k] = std::max(m[k], s[j + k]);
  }
  float mx = m[0];
  for (int k = 1; k < kLanes; ++k) mx = std::max(mx, m[k]);
  for (; j < valid; ++j) mx = std::max(mx, s[j]);
  for (j = 0; j < valid; ++j) s[j] -= mx;
  exp_nonpositive(s, valid);
  for (j = valid; j < width; ++j) s[j] = 0.0f;
  float acc[kLanes] = {};
  for (j = 0; j + kLanes <= valid; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += s[j + k];
  }
  float sum = 0.0f;
  for (int k = 0; k < kLanes; ++k) sum += acc[k];
  for (; j < valid; ++j) sum += s[j];
  return sum;
}

}  // namespace

void matmul(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y) {
  matmul_strided(x, in, n, in, w, out, out, y, out);
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

namespace {

// e^x = 2^k * e^r (Cephes expf): k = round(x / ln 2) by the 1.5 * 2^23 trick, |r| <= ln2 / 2,
// e^r by a degree-6 polynomial. Sets e^r and k (as a float); by pointer, as a Vec8 return value
// would change the baseline clone's ABI. T is float or Vec8: the same
// operations in the same order, so the vector body and the scalar tail agree bit for bit.
template <typename T>
[[gnu::always_inline]] inline void exp_reduced(const T& xv, T* er_out, T* kf_out) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const T kf = (xv * kLog2e + kRound) - kRound;
  const T r = (xv - kf * kLn2Hi) - kf * kLn2Lo;
  T p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  *kf_out = kf;
  *er_out = p * r * r + r + 1.0f;
}

}  // namespace

DP_KERNEL void exp_nonpositive(float* x, int64_t count) {
  using Int8 = int32_t __attribute__((vector_size(32), aligned(4)));
  constexpr float kMin = -87.0f;  // e^-87 is still a normal float, so 2^k needs no special case
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    Vec8 xv = *reinterpret_cast<const Vec8*>(x + i);
    xv = xv > kMin ? xv : Vec8{} + kMin;
    Vec8 p, kf;
    exp_reduced(xv, &p, &kf);
    const Int8 bits = (__builtin_convertvector(kf, Int8) + 127) << 23;
    Vec8 two_k;  // memcpy, not bit_cast: a Vec8 return value would change the baseline ABI
    std::memcpy(&two_k, &bits, sizeof(two_k));
    *reinterpret_cast<Vec8*>(x + i) = p * two_k;
  }
  for (; i < count; ++i) {
    const float xv = x[i] > kMin ? x[i] : kMin;
    float p, kf;
    exp_reduced(xv, &p, &kf);
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

void gather_context(
    const KvRow* rows, int64_t ctx, int kv_heads, int head_dim, float* kt, float* v) {
  // Keys are transposed 16 tokens at a time: the 16 source rows stay in L1 while every output
  // row gets a contiguous run of 16 floats (a column-at-a-time transpose writes one float per
  // cache line and dominated decode steps).
  constexpr int64_t kTokens = 16;
  const int64_t hd = head_dim;
  for (int g = 0; g < kv_heads; ++g) {
    float* ktg = kt + g * hd * ctx;
    float* vg = v + g * ctx * hd;
    for (int64_t j0 = 0; j0 < ctx; j0 += kTokens) {
      const int64_t tokens = std::min(kTokens, ctx - j0);
      for (int64_t d = 0; d < hd; ++d) {
        float* dst = ktg + d * ctx + j0;
        for (int64_t jj = 0; jj < tokens; ++jj) dst[jj] = rows[j0 + jj].k[g * hd + d];
      }
      for (int64_t jj = 0; jj < tokens; ++jj) {
        std::memcpy(vg + (j0 + jj) * hd, rows[j0 + jj].v + g * hd,
                    static_cast<size_t>(hd) * sizeof(float));
      }
    }
  }
}

void attention(const AttentionArgs& a) {
  // Per KV head and block of query tokens, attention is two matrix products through the matmul
  // tile: S = Q K^T over the block's rows (token, head of the group) and O = P V. Keys past a
  // row's causal limit get probability 0, so every row runs over the block's widest context and
  // a query's result does not depend on how the prompt was chunked (x + 0 * v == x).
  const int group = a.q_heads / a.kv_heads;
  const int64_t hd = a.head_dim;
  const int64_t q_stride = static_cast<int64_t>(a.q_heads) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int g = 0; g < a.kv_heads; ++g) {
    const float* kt = a.kt + g * hd * a.ctx_stride;
    const float* v = a.v + g * a.ctx_stride * hd;
    for (int64_t t0 = 0; t0 < a.n; t0 += kQueryBlock) {
      const int64_t tokens = std::min(kQueryBlock, a.n - t0);
      const int64_t rows = tokens * group;
      const int64_t width = a.cached + t0 + tokens;
      float* qa = a.q_block;
      for (int64_t t = 0; t < tokens; ++t) {
        for (int gi = 0; gi < group; ++gi) {
          const float* q = a.q + (t0 + t) * q_stride + (static_cast<int64_t>(g) * group + gi) * hd;
          float* dst = qa + (t * group + gi) * hd;
          for (int64_t d = 0; d < hd; ++d) dst[d] = q[d] * scale;
        }
      }
      matmul_strided(qa, hd, rows, hd, kt, a.ctx_stride, width, a.scores, width);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t valid = a.cached + t0 + r / group + 1;
        a.row_sum[r] = softmax_row(a.scores + r * width, valid, width);
      }
      matmul_strided(a.scores, width, rows, width, v, hd, hd, a.o_block, hd);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = t0 + r / group;
        const int64_t h = static_cast<int64_t>(g) * group + r % group;
        const float inv = 1.0f / a.row_sum[r];
        float* o = a.out + t * q_stride + h * hd;
        const float* src = a.o_block + r * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] = src[d] * inv;
      }
    }
  }
}

int64_t attention_block_tokens() { return kQueryBlock; }

}  // namespace dualpath::compute::kernels
