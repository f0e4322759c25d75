// The safetensors reader on any bytes (a checkpoint's shards come from outside): a malformed
// header or data section is kCorruption naming the tensor, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <span>

#include "compute/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = dualpath::compute::parse_safetensors(
      std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.safetensors");
  (void)file;
  return 0;
}
