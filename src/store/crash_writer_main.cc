// dp_store_crash_writer DIR COUNT: writes blocks test_key(0) .. test_key(COUNT-1) into a
// FileStore on DIR, four per batch, resuming at the first block not yet stored. The
// crash-consistency test (crash_consistency_test.cc) runs it and kills it with SIGKILL.
//
// Lockstep protocol, so that the test chooses kill points by progress and not by time: before
// each batch the writer reads one byte from stdin (EOF: exit), and after it writes "b\n" to
// stdout.

#include <unistd.h>

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
  uint64_t first = 0;
  while (first < count && (*store)->contains(testkit::test_key(first))) ++first;
  for (uint64_t i = first / kBatch * kBatch; i < count; i += kBatch) {
    char token = 0;
    if (::read(STDIN_FILENO, &token, 1) != 1) return 0;
    std::vector<BlockKey> keys;
    for (uint64_t j = i; j < std::min(count, i + kBatch); ++j) keys.push_back(testkit::test_key(j));
    for (const auto& s : testkit::write_blocks(**store, keys)) {
      if (!s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        return 1;
      }
    }
    if (::write(STDOUT_FILENO, "b\n", 2) != 2) return 1;
  }
  return 0;
}
