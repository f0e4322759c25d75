#pragma once
// A small safetensors reader and writer, F32 tensors only (the CPU reference model is fp32).
// Format (huggingface/safetensors): 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "string", ...}}, then the data buffer; offsets are relative to it.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::compute {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, product(shape) values

  int64_t elements() const;
};

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__", string values only
};

// Half-precision values as checkpoints store them (little-endian bits), to float, exactly.
float bf16_to_float(uint16_t bits);
float f16_to_float(uint16_t bits);

// Reads a whole file. F32 tensors load as they are; BF16 and F16 ones are converted to fp32
// (exactly: every half value is a float). Errors (kIoError for the OS, kCorruption for malformed content) name the
// file and, where one is at fault, the tensor: a short or oversized header, JSON that does not
// parse, a dtype other than F32, offsets outside the data buffer or not matching the shape,
// overlapping tensors.
Result<SafetensorsFile> read_safetensors(const std::string& path);
// The same from bytes in memory (`path` names them in errors).
Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes,
                                          const std::string& path);

// Writes `file` (tensors in name order, data packed back to back), atomically: to a temporary
// name in the same directory, then rename. Each tensor's data must match its shape.
Status write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace dualpath::compute
