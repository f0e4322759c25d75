#include "compute/cpu_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <type_traits>

#include "compute/init_rng.h"
#include "compute/safetensors.h"

// The embedded file (builtin_weights.S).
extern "C" const char dp_tiny_weights_begin[];
extern "C" const char dp_tiny_weights_end[];

namespace dualpath::compute {
namespace {

std::vector<float> uniform(
    uint64_t seed, uint64_t tensor_index, size_t n, float scale, float offset = 0.0f) {
  SplitMix64 rng(mix64(seed ^ mix64(tensor_index + 1)));
  std::vector<float> v(n);
  for (float& x : v) x = offset + scale * rng.uniform_pm1();
  return v;
}

// Uniform in [-a, a) has variance a^2 / 3: a = sqrt(3 / fan_in) gives variance 1 / fan_in.
float init_scale(int fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); }

// One named tensor of the file format: how it maps to a CpuWeights field, and its shapes.
// F is std::vector<float> or const std::vector<float>.
template <typename F>
struct TensorSlot {
  std::string name;
  F* field;
  int64_t rows;           // in (our layout)
  int64_t cols;           // out (our layout); 0 for a vector
  bool stored_as_out_in;  // Hugging Face Linear weights are [out][in]
};

// W is CpuWeights or const CpuWeights.
template <typename W>
auto slots(W& w) {
  using F = std::remove_pointer_t<decltype(&w.embed)>;  // const-qualified when W is
  const auto& c = w.config;
  std::vector<TensorSlot<F>> s;
  s.push_back({"model.embed_tokens.weight", &w.embed, c.vocab, c.d_model, false});
  for (int l = 0; l < c.layers; ++l) {
    auto& L = w.layers[l];
    const std::string p = fmt::format("model.layers.{}.", l);
    s.push_back({p + "input_layernorm.weight", &L.attn_norm, c.d_model, 0, false});
    s.push_back({p + "self_attn.q_proj.weight", &L.wq, c.d_model, c.q_dim(), true});
    s.push_back({p + "self_attn.k_proj.weight", &L.wk, c.d_model, c.kv_dim(), true});
    s.push_back({p + "self_attn.v_proj.weight", &L.wv, c.d_model, c.kv_dim(), true});
    s.push_back({p + "self_attn.o_proj.weight", &L.wo, c.q_dim(), c.d_model, true});
    s.push_back({p + "post_attention_layernorm.weight", &L.ffn_norm, c.d_model, 0, false});
    s.push_back({p + "mlp.gate_proj.weight", &L.w_gate, c.d_model, c.ffn_dim, true});
    s.push_back({p + "mlp.up_proj.weight", &L.w_up, c.d_model, c.ffn_dim, true});
    s.push_back({p + "mlp.down_proj.weight", &L.w_down, c.ffn_dim, c.d_model, true});
  }
  s.push_back({"model.norm.weight", &w.final_norm, c.d_model, 0, false});
  s.push_back({"lm_head.weight", &w.lm_head, c.d_model, c.vocab, true});
  return s;
}

std::vector<float> transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  }
  return t;
}

}  // namespace

Result<std::shared_ptr<const CpuWeights>> random_weights(const CpuModelConfig& config,
                                                         uint64_t seed) {
  DP_RETURN_IF_ERROR(config.validate());
  auto w = std::make_shared<CpuWeights>();
  w->config = config;
  w->layers.resize(config.layers);
  // Tensor indices follow slots() order, so a tensor's values do not depend on the others' sizes.
  uint64_t index = 0;
  for (const auto& s : slots(*w)) {
    const size_t n = static_cast<size_t>(s.rows * (s.cols == 0 ? 1 : s.cols));
    if (s.cols == 0) {
      *s.field = uniform(seed, index++, n, 0.1f, 1.0f);  // norm gains around 1
    } else if (s.field == &w->embed) {
      *s.field = uniform(seed, index++, n, 1.0f);
    } else {
      *s.field = uniform(seed, index++, n, init_scale(static_cast<int>(s.rows)));
    }
  }
  return std::shared_ptr<const CpuWeights>(std::move(w));
}

Result<std::shared_ptr<const CpuWeights>> load_weights(const std::string& path,
                                                       const CpuModelConfig& config) {
  DP_RETURN_IF_ERROR(config.validate());
  DP_ASSIGN_OR_RETURN(SafetensorsFile file, read_safetensors(path));
  return weights_from(std::move(file), path, config);
}

std::span<const std::byte> builtin_weights_file() {
  return {reinterpret_cast<const std::byte*>(dp_tiny_weights_begin),
          static_cast<size_t>(dp_tiny_weights_end - dp_tiny_weights_begin)};
}

Result<std::shared_ptr<const CpuWeights>> builtin_weights(const CpuModelConfig& config) {
  if (config.name != "tiny") {
    return Status::not_found(fmt::format(
        "model '{}' has no trained weights built in (only tiny does); use live.weights = "
        "\"random\"",
        config.name));
  }
  static const Result<std::shared_ptr<const CpuWeights>> parsed =
      [&]() -> Result<std::shared_ptr<const CpuWeights>> {
    const auto bytes = builtin_weights_file();
    if (bytes.empty()) {
      return Status::not_found(
          "this build carries no trained weights for tiny (models/tiny.safetensors was empty); "
          "use live.weights = \"random\"");
    }
    DP_ASSIGN_OR_RETURN(SafetensorsFile file,
                        parse_safetensors(bytes, "the built-in models/tiny.safetensors"));
    return weights_from(std::move(file), "the built-in models/tiny.safetensors", config);
  }();
  return parsed;
}

Result<std::shared_ptr<const CpuWeights>> weights_from(SafetensorsFile file,
                                                       const std::string& path,
                                                       const CpuModelConfig& config) {
  DP_RETURN_IF_ERROR(config.validate());
  auto w = std::make_shared<CpuWeights>();
  w->config = config;
  w->layers.resize(config.layers);
  for (const auto& s : slots(*w)) {
    auto it = file.tensors.find(s.name);
    if (it == file.tensors.end()) {
      return Status::not_found(fmt::format(
          "weights file '{}' has no tensor '{}' (model '{}' with {} layers needs it); is it a "
          "llama-style checkpoint of this shape?",
          path, s.name, config.name, config.layers));
    }
    Tensor& t = it->second;
    std::vector<int64_t> want;
    if (s.cols == 0) {
      want = {s.rows};
    } else if (s.stored_as_out_in) {
      want = {s.cols, s.rows};
    } else {
      want = {s.rows, s.cols};
    }
    if (t.shape != want) {
      return Status::invalid_argument(
          fmt::format("weights file '{}': tensor '{}' has shape [{}] but model '{}' needs [{}]",
                      path, s.name, fmt::join(t.shape, ", "), config.name, fmt::join(want, ", ")));
    }
    *s.field = s.stored_as_out_in ? transpose(t.data, s.cols, s.rows) : std::move(t.data);
  }
  return std::shared_ptr<const CpuWeights>(std::move(w));
}

Status save_weights(const std::string& path, const CpuWeights& weights) {
  SafetensorsFile file;
  const auto& c = weights.config;
  file.metadata = {{"format", "pt"},
                   {"dualpath.model", c.name},
                   {"dualpath.d_model", std::to_string(c.d_model)},
                   {"dualpath.layers", std::to_string(c.layers)},
                   {"dualpath.q_heads", std::to_string(c.q_heads)},
                   {"dualpath.kv_heads", std::to_string(c.kv_heads)},
                   {"dualpath.head_dim", std::to_string(c.head_dim)},
                   {"dualpath.ffn_dim", std::to_string(c.ffn_dim)},
                   {"dualpath.vocab", std::to_string(c.vocab)}};
  for (const auto& s : slots(weights)) {
    Tensor t;
    if (s.cols == 0) {
      t.shape = {s.rows};
      t.data = *s.field;
    } else if (s.stored_as_out_in) {
      t.shape = {s.cols, s.rows};
      t.data = transpose(*s.field, s.rows, s.cols);
    } else {
      t.shape = {s.rows, s.cols};
      t.data = *s.field;
    }
    file.tensors.emplace(s.name, std::move(t));
  }
  return write_safetensors(path, file);
}

}  // namespace dualpath::compute
