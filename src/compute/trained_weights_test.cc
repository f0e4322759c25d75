// The built-in tiny model's trained weights (models/tiny.safetensors, carried in the binary):
// they load, fit the budget, and the C++ transformer reproduces the greedy tokens that the
// training script's PyTorch model gave for the same weights (stored in the file's metadata), which
// holds the two implementations together (RMSNorm, RoPE on halves, GQA, SwiGLU, the layouts).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compute/cpu_model.h"
#include "compute/cpu_weights.h"
#include "compute/test_util.h"

namespace dualpath::compute {
namespace {

TEST(TrainedWeights, TheCppModelGivesTheGreedyTokensTorchGave) {
  const auto bytes = builtin_weights_file();
  ASSERT_FALSE(bytes.empty()) << "the build carries no models/tiny.safetensors";
  EXPECT_LE(bytes.size(), size_t{16} << 20) << "over the 16 MB budget";
  auto file = parse_safetensors(bytes, "built-in");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_NE(file->metadata["dualpath.corpus"].find("sqlite3-doc"), std::string::npos);
  const auto prompt = nlohmann::json::parse(file->metadata["dualpath.check_prompt"], nullptr, false);
  const auto want = nlohmann::json::parse(file->metadata["dualpath.check_greedy"], nullptr, false);
  ASSERT_TRUE(prompt.is_array() && want.is_array() && !want.empty());

  auto config = cpu_model_preset("tiny");
  ASSERT_TRUE(config.is_ok());
  auto weights = builtin_weights(*config);
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  const std::vector<int32_t> tokens = prompt.get<std::vector<int32_t>>();
  const std::vector<int32_t> got =
      testing::greedy_generate(CpuModel(*weights), tokens, static_cast<int64_t>(want.size()));
  EXPECT_EQ(got, want.get<std::vector<int32_t>>());
}

TEST(TrainedWeights, OnlyTinyHasThem) {
  auto small = cpu_model_preset("small");
  ASSERT_TRUE(small.is_ok());
  auto w = builtin_weights(*small);
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("live.weights = \"random\""), std::string::npos);
}

}  // namespace
}  // namespace dualpath::compute
