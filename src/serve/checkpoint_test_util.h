#pragma once
// A small Hugging Face llama checkpoint for the tests of `serve --model DIR`, made on the spot
// since nothing can be downloaded: a SentencePiece model trained here (libsentencepiece's
// trainer, the code behind `spm_train`) on generated English-like text, a config.json, and
// random weights in model.safetensors.

#include <sentencepiece_trainer.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compute/checkpoint.h"
#include "compute/cpu_weights.h"
#include "dualpath/result.h"

namespace dualpath::serve::testing {

// `lines` sentences of words drawn from a fixed list (some with non-ASCII letters), seeded.
inline std::string test_corpus(int lines, uint32_t seed) {
  static const char* const kWords[] = {
      "the",    "query",   "planner", "chooses", "an",      "index",  "for",   "each",
      "table",  "and",     "reads",   "rows",    "from",    "disk",   "when",  "cache",
      "is",     "cold",    "a",       "block",   "of",      "keys",   "holds", "values",
      "agent",  "turn",    "prompt",  "reply",   "tokens",  "layer",  "store", "node",
      "prefill", "decode", "path",    "read",    "write",   "buffer", "fast",  "slow",
      "café",   "naïve",   "über",    "世界",    "données", "x",      "y",     "z"};
  constexpr size_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  std::mt19937 rng(seed);
  std::string text;
  for (int l = 0; l < lines; ++l) {
    const int n = 4 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      if (i > 0) text += ' ';
      std::string w = kWords[rng() % kCount];
      if (i == 0 && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
      text += w;
    }
    text += (rng() % 4 == 0) ? "?\n" : ".\n";
  }
  return text;
}

// Trains DIR/tokenizer.model (`vocab` pieces at most, byte fallback, no normalization).
inline Status train_test_tokenizer(const std::string& dir, int vocab = 400) {
  const std::string corpus = (std::filesystem::path(dir) / "corpus.txt").string();
  std::ofstream(corpus) << test_corpus(3000, 17);
  const std::string prefix = (std::filesystem::path(dir) / "tokenizer").string();
  const auto s = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus + " --model_prefix=" + prefix + " --vocab_size=" +
      std::to_string(vocab) +
      " --model_type=unigram --byte_fallback=true --character_coverage=1.0"
      " --normalization_rule_name=identity --hard_vocab_limit=false --minloglevel=2");
  std::filesystem::remove(corpus);
  std::filesystem::remove(prefix + ".vocab");
  if (!s.ok()) return Status::internal("spm training failed: " + s.ToString());
  return Status::ok();
}

// DIR = config.json (vocab 512) + random weights + tokenizer.model; the weights, for running
// the same model in the test's process.
inline Result<std::shared_ptr<const compute::CpuWeights>> write_test_checkpoint(
    const std::string& dir, uint64_t seed = 5) {
  std::filesystem::create_directories(dir);
  const std::string config =
      R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
          "vocab_size": 512, "rms_norm_eps": 1e-05})";
  std::ofstream((std::filesystem::path(dir) / "config.json").string()) << config;
  DP_ASSIGN_OR_RETURN(compute::CpuModelConfig c, compute::config_from_hf_json(config, "config.json"));
  DP_ASSIGN_OR_RETURN(auto weights, compute::random_weights(c, seed));
  DP_RETURN_IF_ERROR(compute::save_weights((std::filesystem::path(dir) / "model.safetensors").string(),
                                           *weights));
  DP_RETURN_IF_ERROR(train_test_tokenizer(dir));
  return weights;
}

}  // namespace dualpath::serve::testing
