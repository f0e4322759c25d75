#include "compute/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

namespace dualpath::compute {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian port must byte-swap");

// A header above this is certainly not a model header (the format's own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

Status corrupt(const std::string& path, const std::string& what) {
  return Status::corruption(fmt::format(
      "safetensors file '{}': {}; the file is damaged or not a safetensors file, rewrite it", path,
      what));
}

}  // namespace

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;  // bfloat16 is fp32's top half
  float f = 0;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits = 0;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant != 0) {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FFu) << 13);
  } else {
    bits = sign;  // zero
  }
  float f = 0;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return Status::io_error(fmt::format("cannot open safetensors file '{}': {} (errno {})", path,
                                        std::strerror(errno), errno));
  }
  const auto file_bytes = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::vector<char> bytes(file_bytes);
  in.read(bytes.data(), static_cast<std::streamsize>(file_bytes));
  if (!in) {
    return Status::io_error(fmt::format("reading safetensors file '{}' ({} bytes) failed: {}", path,
                                        file_bytes, std::strerror(errno)));
  }
  return parse_safetensors(std::as_bytes(std::span<const char>(bytes)), path);
}

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes,
                                          const std::string& path) {
  const uint64_t file_bytes = bytes.size();
  if (file_bytes < 8) {
    return corrupt(path,
                   fmt::format("{} bytes is shorter than the 8-byte header length", file_bytes));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes = (header_bytes << 8) | std::to_integer<uint64_t>(bytes[static_cast<size_t>(i)]);
  }
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_bytes - 8) {
    return corrupt(path, fmt::format("header length {} exceeds the file ({} bytes) or the {} "
                                     "byte limit",
                                     header_bytes, file_bytes, kMaxHeaderBytes));
  }
  const std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, header_bytes);
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  const std::byte* data = bytes.data() + 8 + header_bytes;

  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corrupt(path, "the JSON header does not parse as an object");
  }
  SafetensorsFile out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return corrupt(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return corrupt(path, fmt::format("__metadata__ value of '{}' is not a string", key));
        }
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      return corrupt(path, fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    }
    const auto& dtype = entry["dtype"];
    const std::string dt = dtype.is_string() ? dtype.get<std::string>() : std::string();
    if (dt != "F32" && dt != "BF16" && dt != "F16") {
      return Status::invalid_argument(fmt::format(
          "safetensors file '{}': tensor '{}' has dtype {}; F32, BF16 and F16 are read (convert "
          "the checkpoint to one of them)",
          path, name, dtype.dump()));
    }
    const uint64_t element_bytes = dt == "F32" ? 4 : 2;
    Tensor t;
    const auto& shape = entry["shape"];
    if (!shape.is_array())
      return corrupt(path, fmt::format("tensor '{}': shape is not a list", name));
    uint64_t elements = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ULL << 40)) {
        return corrupt(path, fmt::format("tensor '{}': bad dimension {}", name, d.dump()));
      }
      t.shape.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > data_bytes) {
        return corrupt(
            path, fmt::format("tensor '{}': shape {} exceeds the data buffer", name, shape.dump()));
      }
    }
    const auto& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      return corrupt(
          path, fmt::format("tensor '{}': data_offsets {} is not [begin, end]", name, off.dump()));
    }
    const auto begin = off[0].get<uint64_t>();
    const auto end = off[1].get<uint64_t>();
    if (begin > end || end > data_bytes) {
      return corrupt(path, fmt::format("tensor '{}': data_offsets [{}, {}] outside the {}-byte "
                                       "data buffer",
                                       name, begin, end, data_bytes));
    }
    if (end - begin != elements * element_bytes) {
      return corrupt(
          path, fmt::format("tensor '{}': data_offsets [{}, {}] hold {} bytes but "
                            "shape {} needs {}",
                            name, begin, end, end - begin, shape.dump(), elements * element_bytes));
    }
    t.data.resize(elements);
    if (elements > 0 && element_bytes == 4) {
      std::memcpy(t.data.data(), data + begin, end - begin);
    } else {
      for (uint64_t i = 0; i < elements; ++i) {
        const auto lo = std::to_integer<uint16_t>(data[begin + 2 * i]);
        const auto hi = std::to_integer<uint16_t>(data[begin + 2 * i + 1]);
        const auto half = static_cast<uint16_t>(lo | (hi << 8));  // little endian
        t.data[i] = dt == "BF16" ? bf16_to_float(half) : f16_to_float(half);
      }
    }
    ranges.emplace_back(begin, end);
    out.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return corrupt(path, fmt::format("tensors overlap at data bytes [{}, {})", ranges[i].first,
                                       ranges[i - 1].second));
    }
  }
  return out;
}

Status write_safetensors(const std::string& path, const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__") {
      return Status::invalid_argument(
          fmt::format("writing '{}': '__metadata__' is reserved, not a tensor name", path));
    }
    if (t.elements() != static_cast<int64_t>(t.data.size())) {
      return Status::invalid_argument(
          fmt::format("writing '{}': tensor '{}' has {} values but its shape needs {}", path, name,
                      t.data.size(), t.elements()));
    }
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string text = header.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Status::io_error(fmt::format("cannot create '{}': {} (errno {}); check the directory",
                                          tmp, std::strerror(errno), errno));
    }
    unsigned char len_bytes[8];
    uint64_t n = text.size();
    for (unsigned char& b : len_bytes) b = static_cast<unsigned char>(n & 0xff), n >>= 8;
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : file.tensors) {
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
    out.flush();
    if (!out) {
      return Status::io_error(fmt::format("writing '{}' failed: {} (errno {}); is the disk full?",
                                          tmp, std::strerror(errno), errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::io_error(fmt::format("renaming '{}' to '{}' failed: {} (errno {})", tmp, path,
                                        std::strerror(errno), errno));
  }
  return Status::ok();
}

}  // namespace dualpath::compute
