#include "compute/checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "compute/safetensors.h"

namespace dualpath::compute {

namespace {

using Json = nlohmann::json;

Result<int> positive_int(const Json& j, const char* key, const std::string& origin,
                         std::optional<int> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Status::invalid_argument(
        fmt::format("{}: \"{}\" is missing; a llama config.json gives it", origin, key));
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (1 << 24)) {
    return Status::invalid_argument(
        fmt::format("{}: \"{}\" = {} must be a positive integer", origin, key, it->dump()));
  }
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace

Result<CpuModelConfig> config_from_hf_json(const std::string& json_text, const std::string& origin) {
  const Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::invalid_argument(fmt::format("{}: not a JSON object", origin));
  }
  const std::string type = j.value("model_type", std::string());
  if (type != "llama") {
    return Status::invalid_argument(fmt::format(
        "{}: model_type \"{}\" is not supported; the CPU model runs the llama architecture "
        "(RMSNorm, RoPE, GQA, SwiGLU, no biases)",
        origin, type));
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
    return Status::invalid_argument(
        fmt::format("{}: hidden_act {} is not supported (only \"silu\")", origin,
                    j["hidden_act"].dump()));
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    return Status::invalid_argument(fmt::format(
        "{}: rope_scaling {} is not supported (plain RoPE only)", origin, j["rope_scaling"].dump()));
  }
  if (j.value("attention_bias", false) || j.value("mlp_bias", false)) {
    return Status::invalid_argument(fmt::format("{}: biases are not supported", origin));
  }
  CpuModelConfig c;
  c.name = origin;
  DP_ASSIGN_OR_RETURN(c.d_model, positive_int(j, "hidden_size", origin));
  DP_ASSIGN_OR_RETURN(c.layers, positive_int(j, "num_hidden_layers", origin));
  DP_ASSIGN_OR_RETURN(c.q_heads, positive_int(j, "num_attention_heads", origin));
  DP_ASSIGN_OR_RETURN(c.kv_heads, positive_int(j, "num_key_value_heads", origin, c.q_heads));
  DP_ASSIGN_OR_RETURN(c.head_dim, positive_int(j, "head_dim", origin, c.d_model / c.q_heads));
  DP_ASSIGN_OR_RETURN(c.ffn_dim, positive_int(j, "intermediate_size", origin));
  DP_ASSIGN_OR_RETURN(c.vocab, positive_int(j, "vocab_size", origin));
  if (auto t = j.find("rope_theta"); t != j.end() && t->is_number()) {
    c.rope_theta = t->get<float>();
  }
  c.norm_eps = 1e-6f;  // Hugging Face llama's default
  if (auto e = j.find("rms_norm_eps"); e != j.end() && e->is_number()) c.norm_eps = e->get<float>();
  DP_RETURN_IF_ERROR(c.validate(), "{}", origin);
  return c;
}

Result<std::shared_ptr<const CpuWeights>> load_checkpoint_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::ifstream in(config_path);
  if (!in) {
    return Status::not_found(fmt::format(
        "{}: no config.json; give a Hugging Face llama checkpoint directory", dir));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  DP_ASSIGN_OR_RETURN(CpuModelConfig config, config_from_hf_json(ss.str(), config_path));
  config.name = dir;
  const Json j = Json::parse(ss.str(), nullptr, false);
  const bool tied = j.value("tie_word_embeddings", false);
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return Status::not_found(fmt::format("{}: no *.safetensors files", dir));
  }
  SafetensorsFile merged;
  for (const std::string& f : files) {
    DP_ASSIGN_OR_RETURN(SafetensorsFile part, read_safetensors(f));
    for (auto& [name, t] : part.tensors) {
      if (!merged.tensors.emplace(name, std::move(t)).second) {
        return Status::invalid_argument(
            fmt::format("{}: tensor '{}' is in more than one shard (at least {})", dir, name, f));
      }
    }
  }
  if (tied && merged.tensors.count("lm_head.weight") == 0) {
    auto embed = merged.tensors.find("model.embed_tokens.weight");
    if (embed != merged.tensors.end()) merged.tensors.emplace("lm_head.weight", embed->second);
  }
  return weights_from(std::move(merged), dir, config);
}

}  // namespace dualpath::compute
