#pragma once
// A TCP port free on loopback now: the kernel's choice for a socket bound to port 0, released
// at once (another program may take it before use; harmless for a benchmark's servers). One
// helper for the drivers that start servers on ports of their own (`bench transport`'s
// ucx_perftest, `bench control`'s serve).

#include <cstdint>

#include "dualpath/result.h"

namespace dualpath::bench {

Result<uint16_t> free_loopback_port();

}  // namespace dualpath::bench
