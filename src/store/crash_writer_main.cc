// dp_store_crash_writer DIR COUNT: writes blocks test_key(0) .. test_key(COUNT-1) into a
// FileStore on DIR, four per batch, skipping those already stored. The crash-consistency test
// (crash_consistency_test.cc) runs it and kills it with SIGKILL at random points.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/file_store.h"
#include "store/test_blocks.h"

int main(int argc, char** argv) {
  using namespace dualpath::store;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR COUNT\n", argv[0]);
    return 2;
  }
  FileStoreOptions o;
  o.data_paths = {argv[1]};
  o.model = fingerprint_of("crash-test");
  o.layout = BlockLayout{4, 64, 64};  // 16 KiB payload: a multi-page write each
  o.queue_depth = 8;
  auto store = FileStore::open(o);
  if (!store.is_ok()) {
    std::fprintf(stderr, "%s\n", store.status().to_string().c_str());
    return 1;
  }
  const uint64_t count = std::strtoull(argv[2], nullptr, 10);
  constexpr uint64_t kBatch = 4;
  for (uint64_t i = 0; i < count; i += kBatch) {
    std::vector<BlockKey> keys;
    for (uint64_t j = i; j < std::min(count, i + kBatch); ++j) keys.push_back(testkit::test_key(j));
    for (const auto& s : testkit::write_blocks(**store, keys)) {
      if (!s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        return 1;
      }
    }
  }
  return 0;
}
