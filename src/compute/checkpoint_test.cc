// Hugging Face llama checkpoint directories (compute/checkpoint.h): config.json read into the
// model's shape, safetensors shards merged, and the same logits as the weights they came from;
// configs we cannot run are refused with the field named.
#include "compute/checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>

#include "compute/cpu_model.h"
#include "compute/test_util.h"

namespace dualpath::compute {
namespace {

using testing::ScratchDir;

const char* kConfig = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
  "vocab_size": 300, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "hidden_act": "silu",
  "tie_word_embeddings": false, "torch_dtype": "float32"})";

TEST(Checkpoint, ADirectoryLoadsAndGivesTheLogitsOfItsWeights) {
  auto config = config_from_hf_json(kConfig, "config.json");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->kv_heads, 2);
  EXPECT_FLOAT_EQ(config->rope_theta, 500000.0f);
  auto weights = random_weights(*config, 9);
  ASSERT_TRUE(weights.is_ok());
  ScratchDir dir;
  const std::string d = dir.file("ckpt");
  std::filesystem::create_directories(d);
  std::ofstream(d + "/config.json") << kConfig;
  ASSERT_TRUE(save_weights(d + "/model.safetensors", **weights).is_ok());
  auto loaded = load_checkpoint_dir(d);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const std::vector<int32_t> prompt = {1, 5, 299, 42, 7, 7, 0, 128};
  std::vector<std::span<const float>> none(2);
  auto want = CpuModel(*weights).prefill(none, prompt, 0, LogitsMode::kAll);
  auto got = CpuModel(*loaded).prefill(none, prompt, 0, LogitsMode::kAll);
  ASSERT_TRUE(want.is_ok() && got.is_ok());
  EXPECT_EQ(got->logits, want->logits);
}

TEST(Checkpoint, ConfigsItCannotRunAreRefusedNamingTheField) {
  const struct {
    const char* json;
    const char* mentions;
  } cases[] = {
      {R"({"model_type": "gpt2"})", "model_type \"gpt2\""},
      {R"({"model_type": "llama", "num_hidden_layers": 2})", "\"hidden_size\" is missing"},
      {R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300,
          "rope_scaling": {"type": "linear", "factor": 2.0}})",
       "rope_scaling"},
      {R"({"model_type": "llama", "hidden_size": -64})", "\"hidden_size\" = -64"},
      {"{not json", "not a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = config_from_hf_json(c.json, "x/config.json");
    ASSERT_FALSE(r.is_ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos)
        << r.status().message();
  }
  ScratchDir dir;
  auto none = load_checkpoint_dir(dir.file("nothing"));
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no config.json"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::compute
