#pragma once
// TransportConfig: the [transport] section of a dualpath TOML config, read into the options of
// the contexts, workers and traffic manager of one engine (docs/transport.md "Configuration").
//
//   [transport]
//   tls = "rc,self"               # UCX_TLS; "sm,self" or "tcp,self" when emulating on one host
//   net_devices = "mlx5_0:1"      # UCX_NET_DEVICES: the CNIC paired with this engine's GPU
//   timeout_ms = 10000            # deadline of every transfer
//   lanes = "per_class"           # "shared": one worker; "per_class": a context+worker per class
//   poll_us = 0                   # progress threads poll this long after their last event before
//                                 # sleeping on the event fd; > 0 only on dedicated cores
//   poll_in_flight_us = -1        # the same while transfers are in flight (-1: worker default)
//   [transport.model]             # the model class's context (lanes = "per_class")
//   ib_sl = 0                     # InfiniBand service level -> a high-priority VL
//   ib_traffic_class = 106        # RoCE: GRH traffic class, DSCP 26 << 2 | ECT
//   [transport.kv]
//   ib_sl = 2
//   ib_traffic_class = 40         # DSCP 10 << 2
//   [transport.traffic]
//   model_weight = 99
//   kv_weight = 1
//   chunk_bytes = 1048576
//   max_inflight_bytes = 4194304
//   model_reserve_bytes = 262144
//   max_batch_ops = 64
//   cnic_gbps = 0                 # CNIC emulation; 0 = off
// Thread-compatible.

#include <string>

#include "common/config.h"
#include "transport/context.h"
#include "transport/traffic_manager.h"
#include "transport/worker.h"

namespace dualpath::transport {

// QoS of one traffic class's context. -1 leaves UCX's default.
struct ClassQos {
  int ib_sl = -1;             // UCX_IB_SL: 0..15
  int ib_traffic_class = -1;  // UCX_IB_TRAFFIC_CLASS: 0..255 (RoCE GRH / DSCP << 2)
};

// `base` plus the UCX settings that put a context's traffic on the class's service level.
ContextOptions with_qos(ContextOptions base, const ClassQos& qos);

struct TransportConfig {
  ContextOptions context;  // tls and devices, shared by both classes
  bool per_class_lanes = false;
  ClassQos model_qos;
  ClassQos kv_qos;
  Duration timeout = std::chrono::seconds(10);
  // WorkerOptions::poll_before_sleep / poll_while_in_flight of the engine's workers, µs
  // (poll_in_flight_us < 0: the worker default).
  int64_t poll_us = 0;
  int64_t poll_in_flight_us = -1;
  TrafficManagerOptions traffic;

  ContextOptions model_context() const { return with_qos(context, model_qos); }
  ContextOptions kv_context() const { return with_qos(context, kv_qos); }
};

// Reads the keys above from `config` (absent keys keep their defaults; errors are collected by
// the Config and reported by its finish()).
TransportConfig read_transport_config(Config& config);

}  // namespace dualpath::transport
