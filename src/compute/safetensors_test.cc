#include "compute/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "compute/cpu_model.h"
#include "compute/cpu_weights.h"
#include "compute/test_util.h"

namespace dualpath::compute {
namespace {

using testing::ScratchDir;

void write_raw(const std::string& path,
               const std::string& header,
               const std::string& data,
               int64_t declared_len = -1) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = declared_len < 0 ? header.size() : static_cast<uint64_t>(declared_len);
  for (int i = 0; i < 8; ++i, n >>= 8) out.put(static_cast<char>(n & 0xff));
  out << header << data;
}

std::string floats(int n) { return std::string(static_cast<size_t>(n) * 4, '\0'); }

TEST(Safetensors, RoundTripPreservesTensorsShapesAndMetadata) {
  ScratchDir dir;
  SafetensorsFile f;
  f.tensors["a"] = {{2, 3}, {1, 2, 3, 4, 5, 6}};
  f.tensors["b.weight"] = {{4}, {-1.5f, 0, 3.25f, 1e-30f}};
  f.tensors["empty"] = {{0, 7}, {}};
  f.metadata = {{"format", "pt"}, {"k", "v"}};
  ASSERT_TRUE(write_safetensors(dir.file("t.safetensors"), f).is_ok());
  auto r = read_safetensors(dir.file("t.safetensors"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 3u);
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(r->tensors[name].shape, t.shape) << name;
    EXPECT_EQ(r->tensors[name].data, t.data) << name;
  }
  EXPECT_EQ(r->metadata, f.metadata);
}

TEST(Safetensors, WeightsRoundTripGivesBitIdenticalLogits) {
  ScratchDir dir;
  auto w = testing::tiny_weights(3);
  ASSERT_TRUE(save_weights(dir.file("tiny.safetensors"), *w).is_ok());
  auto loaded = load_weights(dir.file("tiny.safetensors"), w->config);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->layers[2].wq, w->layers[2].wq);
  EXPECT_EQ((*loaded)->lm_head, w->lm_head);
  const auto tokens = testing::random_tokens(20, 512, 1);
  auto a = CpuModel(w).prefill({}, tokens, 0);
  auto b = CpuModel(*loaded).prefill({}, tokens, 0);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->logits, b->logits);
}

TEST(Safetensors, LoadWeightsNamesTheMissingOrMisshapenTensor) {
  ScratchDir dir;
  auto w = testing::tiny_weights(3);
  ASSERT_TRUE(save_weights(dir.file("tiny.safetensors"), *w).is_ok());
  auto small = cpu_model_preset("small");
  auto r = load_weights(dir.file("tiny.safetensors"), *small);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(r.status().is_invalid_argument()) << r.status().to_string();
  EXPECT_NE(r.status().message().find("model.embed_tokens.weight"), std::string::npos);
  EXPECT_NE(r.status().message().find("tiny.safetensors"), std::string::npos);

  auto more_layers = w->config;
  more_layers.layers = 5;
  r = load_weights(dir.file("tiny.safetensors"), more_layers);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(r.status().is_not_found());
  EXPECT_NE(r.status().message().find("model.layers.4."), std::string::npos);
}

struct Malformed {
  const char* name;
  std::string header;
  std::string data;
  int64_t declared_len;
  StatusCode code;
  const char* mentions;
};

TEST(Safetensors, HalfPrecisionTensorsAreConvertedExactly) {
  // bf16 1.5 = 0x3FC0, -2 = 0xC000; f16 1.5 = 0x3E00, -2 = 0xC000, 65504 = 0x7BFF,
  // the smallest subnormal 2^-24 = 0x0001, and 0x0000.
  EXPECT_EQ(bf16_to_float(0x3FC0), 1.5f);
  EXPECT_EQ(bf16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x3E00), 1.5f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_float(0x0000), 0.0f);
  EXPECT_TRUE(std::isinf(f16_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  ScratchDir dir;
  const std::string path = dir.file("half.safetensors");
  const std::string header =
      R"({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},)"
      R"( "h": {"dtype": "F16", "shape": [1, 2], "data_offsets": [4, 8]}})";
  const std::string data("\xC0\x3F\x00\xC0\x00\x3E\xFF\x7B", 8);
  write_raw(path, header, data, -1);
  auto r = read_safetensors(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->tensors["b"].data, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(r->tensors["h"].data, (std::vector<float>{1.5f, 65504.0f}));
  EXPECT_EQ(r->tensors["h"].shape, (std::vector<int64_t>{1, 2}));
}

TEST(Safetensors, MalformedFilesGiveClearErrorsNamingFileAndTensor) {
  ScratchDir dir;
  const Malformed cases[] = {
      {"short", "", "", -2, StatusCode::kCorruption, "8-byte"},
      {"huge_len", "{}", "", 1 << 20, StatusCode::kCorruption, "header length"},
      {"bad_json", "{\"a\": [", "", -1, StatusCode::kCorruption, "JSON"},
      {"i8", R"({"w": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})", floats(1), -1,
       StatusCode::kInvalidArgument, "'w'"},
      {"f16_size", R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", floats(2),
       -1, StatusCode::kCorruption, "'w'"},
      {"outside", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", floats(1), -1,
       StatusCode::kCorruption, "'w'"},
      {"mismatch", R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", floats(2),
       -1, StatusCode::kCorruption, "'w'"},
      {"no_offsets", R"({"w": {"dtype": "F32", "shape": [2]}})", floats(2), -1,
       StatusCode::kCorruption, "'w'"},
      {"overlap",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       floats(3), -1, StatusCode::kCorruption, "overlap"},
  };
  for (const Malformed& c : cases) {
    const std::string path = dir.file(std::string(c.name) + ".safetensors");
    if (c.declared_len == -2) {
      std::ofstream(path, std::ios::binary) << "abc";
    } else {
      write_raw(path, c.header, c.data, c.declared_len);
    }
    auto r = read_safetensors(path);
    ASSERT_FALSE(r.is_ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status().to_string();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << r.status().to_string();
  }
  auto missing = read_safetensors(dir.file("absent.safetensors"));
  EXPECT_TRUE(missing.status().is_io_error());
}

}  // namespace
}  // namespace dualpath::compute
