#include "transport/transport_config.h"

#include <limits>

namespace dualpath::transport {

ContextOptions with_qos(ContextOptions base, const ClassQos& qos) {
  if (qos.ib_sl >= 0) base.settings.emplace_back("IB_SL", std::to_string(qos.ib_sl));
  if (qos.ib_traffic_class >= 0) {
    base.settings.emplace_back("IB_TRAFFIC_CLASS", std::to_string(qos.ib_traffic_class));
  }
  return base;
}

TransportConfig read_transport_config(Config& config) {
  TransportConfig t;
  t.context.transports = config.string("transport.tls", "sm,self", "the UCX transports (UCX_TLS)");
  t.context.net_devices = config.string("transport.net_devices", "",
                                        "the UCX devices (UCX_NET_DEVICES), e.g. mlx5_0:1");
  t.timeout = std::chrono::milliseconds(
      config.integer("transport.timeout_ms", 10000, 1, 3600 * 1000, "the transfer deadline"));
  t.poll_us = config.integer("transport.poll_us", 0, 0, 10'000'000,
                             "microseconds a progress thread polls before sleeping (0: sleep at "
                             "once; poll only on dedicated cores)");
  t.poll_in_flight_us = config.integer("transport.poll_in_flight_us", -1, -1, 10'000'000,
                                       "microseconds a progress thread polls while transfers "
                                       "are in flight (-1: the default)");
  t.per_class_lanes =
      config.choice("transport.lanes", "shared", {"shared", "per_class"}) == "per_class";
  auto qos = [&](const std::string& cls) {
    ClassQos q;
    q.ib_sl = static_cast<int>(
        config.integer("transport." + cls + ".ib_sl", -1, -1, 15, "the InfiniBand service level"));
    q.ib_traffic_class = static_cast<int>(config.integer("transport." + cls + ".ib_traffic_class",
                                                         -1, -1, 255, "the RoCE traffic class"));
    return q;
  };
  t.model_qos = qos("model");
  t.kv_qos = qos("kv");
  auto& tr = t.traffic;
  const int64_t kMaxBytes = std::numeric_limits<int32_t>::max();
  tr.model_weight = static_cast<uint32_t>(
      config.integer("transport.traffic.model_weight", tr.model_weight, 1, 1000000));
  tr.kv_weight = static_cast<uint32_t>(
      config.integer("transport.traffic.kv_weight", tr.kv_weight, 1, 1000000));
  tr.chunk_bytes = static_cast<uint64_t>(config.integer(
      "transport.traffic.chunk_bytes", static_cast<int64_t>(tr.chunk_bytes), 1, kMaxBytes));
  tr.max_inflight_bytes = static_cast<uint64_t>(
      config.integer("transport.traffic.max_inflight_bytes",
                     static_cast<int64_t>(tr.max_inflight_bytes), 1, kMaxBytes));
  tr.model_reserve_bytes = static_cast<uint64_t>(
      config.integer("transport.traffic.model_reserve_bytes",
                     static_cast<int64_t>(tr.model_reserve_bytes), 0, kMaxBytes));
  tr.max_batch_ops = static_cast<uint32_t>(
      config.integer("transport.traffic.max_batch_ops", tr.max_batch_ops, 1, 65536));
  tr.rate_limit_gbps = config.non_negative_number("transport.traffic.cnic_gbps", 0,
                                                  "the emulated CNIC speed in Gb/s (0: off)");
  if (tr.max_inflight_bytes <= tr.model_reserve_bytes) {
    config.fail("transport.traffic.max_inflight_bytes",
                "must exceed transport.traffic.model_reserve_bytes, or the KV class never sends");
  }
  return t;
}

}  // namespace dualpath::transport
