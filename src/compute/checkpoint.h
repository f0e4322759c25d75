#pragma once
// A Hugging Face llama-architecture checkpoint directory: config.json (model_type "llama", SiLU,
// no rope_scaling, no biases) and its safetensors (one file or shards, F32 / BF16 / F16, the
// llama tensor names; a tied LM head is the embedding). The first piece of `serve --model DIR`
// (docs/api.md "Not done yet": the sentencepiece tokenizer and the serving path are next).
// Errors name the file, the field and the fix. Thread-safe (pure functions).

#include <memory>
#include <string>

#include "compute/cpu_model_config.h"
#include "compute/cpu_weights.h"
#include "dualpath/result.h"

namespace dualpath::compute {

// The model's shape from config.json's text (`origin` names it in errors).
Result<CpuModelConfig> config_from_hf_json(const std::string& json_text, const std::string& origin);

// config.json and every *.safetensors file of `dir`.
Result<std::shared_ptr<const CpuWeights>> load_checkpoint_dir(const std::string& dir);

}  // namespace dualpath::compute
