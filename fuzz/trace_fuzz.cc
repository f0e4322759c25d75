// The WEKA Claude-Code and Mooncake FAST'25 trace readers on any bytes (one file, both
// formats): a malformed line is an error naming file:line, never an exception or a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "workload/mooncake_reader.h"
#include "workload/weka_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dualpath::workload;
  static const std::string path = "/dev/shm/dp_trace_fuzz." + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  (void)read_weka(path);
  (void)read_mooncake(path);
  return 0;
}
