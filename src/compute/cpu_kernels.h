#pragma once
// The fp32 kernels of the CPU reference transformer: plain loops written for the compiler's
// auto-vectoriser (no BLAS, no intrinsics, no -ffast-math), so a result depends only on the inputs
// and the build, never on thread timing. Internal to compute/.

#include <cstdint>

namespace dualpath::compute::kernels {

// y[n][out] = x[n][in] * w[in][out] (row-major; y is overwritten). Register-tiled: 4 rows of x
// by 16 columns of w at a time, so each weight is loaded once per 4 tokens.
void matmul(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y);

// y[t] = x[t] / rms(x[t]) * gain, for n rows of d values. x and y may alias.
void rms_norm(const float* x, int64_t n, int64_t d, const float* gain, float eps, float* y);

// Rotates `heads` heads of head_dim values in each of n rows (row stride `row_stride` floats) by
// the row's angles: the Hugging Face llama convention (pairs i and i + head_dim/2). cos/sin hold
// head_dim/2 values per row.
void rope(float* v,
          int64_t n,
          int heads,
          int head_dim,
          int64_t row_stride,
          const float* cos,
          const float* sin);

// gate[i] = silu(gate[i]) * up[i].
void swiglu(float* gate, const float* up, int64_t count);

// e^x for x <= 0 (x below -87 gives e^-87), to about 2 ulp; vectorisable and deterministic.
void exp_nonpositive(float* x, int64_t count);

// One context token's K and V (kv_heads * head_dim floats each).
struct KvRow {
  const float* k;
  const float* v;
};

// Regroups `ctx` tokens' K and V per KV head for attention():
// kt [kv_heads][head_dim][ctx] (keys transposed) and v [kv_heads][ctx][head_dim].
void gather_context(
    const KvRow* rows, int64_t ctx, int kv_heads, int head_dim, float* kt, float* v);

// Causal GQA attention of n new queries over a context of `cached` + n tokens.
//   q   [n][q_heads * head_dim]   (RoPE applied)
//   kt  [kv_heads][head_dim][ctx_stride]  keys, transposed so a query's scores vectorise
//   v   [kv_heads][ctx_stride][head_dim]
//   out [n][q_heads * head_dim]
// Query t sees context tokens [0, cached + t]. Scratch, for B = attention_block_tokens() and
// G = q_heads / kv_heads: scores B*G*(cached + n) floats, q_block and o_block B*G*head_dim,
// row_sum B*G.
struct AttentionArgs {
  const float* q;
  const float* kt;
  const float* v;
  float* out;
  float* scores;
  float* q_block;
  float* o_block;
  float* row_sum;
  int64_t n;
  int64_t cached;
  int64_t ctx_stride;
  int q_heads;
  int kv_heads;
  int head_dim;
};
void attention(const AttentionArgs& a);
int64_t attention_block_tokens();

}  // namespace dualpath::compute::kernels
