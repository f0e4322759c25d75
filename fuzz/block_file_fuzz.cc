// The block store's read validation on any bytes: the input is written as the block file of one
// key, then read through FileStore (header check, payload checksum, size). The read must either
// succeed with exactly the payload the file holds under a valid header, or be a miss (invalid
// files are quarantined); never a wrong byte or a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "store/aligned_buffer.h"
#include "store/block_file.h"
#include "store/file_store.h"

namespace {

using namespace dualpath::store;

struct Fixture {
  std::string dir = "/dev/shm/dp_block_fuzz." + std::to_string(::getpid());
  std::unique_ptr<FileStore> store;
  BlockKey key{0x0123456789abcdefull, 0xfedcba9876543210ull};
  Fixture() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    FileStoreOptions o;
    o.data_paths = {dir};
    o.model = fingerprint_of("fuzz/tiny");
    o.layout = {1, 1, 16};  // 1 layer, 1 token per block, 16 bytes: a 16-byte payload
    o.sync_writes = false;
    auto s = FileStore::open(o);
    if (!s.is_ok()) std::abort();
    store = std::move(s).value();
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  const std::string path = f.store->block_path(f.key);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const size_t payload = static_cast<size_t>(f.store->layout().full_block_bytes());
  auto buffer = AlignedBuffer::allocate(payload);
  if (!buffer.is_ok()) std::abort();
  std::memset(buffer->data(), 0xAA, payload);
  ReadRequest r{f.key, buffer->first(payload)};
  auto batch = f.store->read(std::span(&r, 1));
  if (!batch.is_ok()) return 0;  // a miss decided at once
  if (!batch->wait_for(std::chrono::seconds(10)).is_ok()) std::abort();  // never a hang
  if (batch->results()[0].is_ok()) {
    // Success: the file is a whole block, and the buffer holds its payload.
    if (size != static_cast<size_t>(block_file_bytes(f.store->layout()))) std::abort();
    if (std::memcmp(buffer->data(), data + kBlockHeaderBytes, payload) != 0) std::abort();
  }
  std::filesystem::remove(path);
  return 0;
}
