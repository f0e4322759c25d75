#pragma once
// StorageNic: one node's storage NIC as the store sees it: the rate limiter all of the node's
// storage traffic passes through, and the read-queue gauge the scheduler reads. One per node,
// shared by every FileStore (and engine) of that node; it must outlive them. Thread-safe.

#include <cstdint>

#include "store/read_queue_gauge.h"
#include "common/clock.h"
#include "common/token_bucket.h"
#include "dualpath/units.h"

namespace dualpath::store {

// One Full Block of the largest model in PAPER.md §4 (16 MiB) may go at once after idling; a node
// passes its own Full Block (engine/node_runtime.cc), so emulated KV gets no more credit than that.
inline constexpr int64_t kDefaultSnicBurstBytes = int64_t{16} << 20;

// Full duplex, as a NIC is and as the simulator models it (sim/cluster_sim.cc: a link per
// direction): reads (into the node) and writes (persisting blocks) each have the whole rate. With
// one bucket for both, the decode nodes' persist writes took 3 % of the read rate on
// configs/emu-2p4d.toml, and at ~70 % read load that made the live reads' queueing ~10 % longer
// than the simulator's (docs/serve.md, "Measured").
struct StorageNic {
  // snic_gbps <= 0: unlimited (off, the default).
  StorageNic(double snic_gbps, Clock& time, int64_t burst_bytes = kDefaultSnicBurstBytes)
      : limiter(snic_gbps > 0 ? gbps_to_bytes_per_s(snic_gbps) : 0.0, burst_bytes),
        write_limiter(snic_gbps > 0 ? gbps_to_bytes_per_s(snic_gbps) : 0.0, burst_bytes),
        clock(time) {}

  TokenBucket limiter;        // reads
  TokenBucket write_limiter;  // writes
  Clock& clock;  // the time the limiter runs on (real, dilated, or manual in tests)
  ReadQueueGauge read_queue;
};

}  // namespace dualpath::store
