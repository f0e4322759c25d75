#include "transport/transport_config.h"

#include <gtest/gtest.h>

namespace dualpath::transport {
namespace {

TEST(TransportConfig, MapsEachClassOntoItsServiceLevel) {
  auto cfg = Config::from_string(
      "[transport]\ntls = \"tcp,self\"\nnet_devices = \"lo\"\nlanes = \"per_class\"\n"
      "poll_us = 500\npoll_in_flight_us = 0\n"
      "[transport.model]\nib_sl = 0\nib_traffic_class = 106\n"
      "[transport.kv]\nib_sl = 2\nib_traffic_class = 40\n"
      "[transport.traffic]\ncnic_gbps = 200\n",
      "t.toml");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  TransportConfig t = read_transport_config(*cfg);
  ASSERT_TRUE(cfg->finish().is_ok()) << cfg->finish().to_string();
  EXPECT_TRUE(t.per_class_lanes);
  EXPECT_EQ(t.poll_us, 500);
  EXPECT_EQ(t.poll_in_flight_us, 0);
  EXPECT_DOUBLE_EQ(t.traffic.rate_limit_gbps, 200);
  ContextOptions kv = t.kv_context();
  ASSERT_EQ(kv.settings.size(), 2u);
  EXPECT_EQ(kv.settings[0], (std::pair<std::string, std::string>{"IB_SL", "2"}));
  EXPECT_EQ(kv.settings[1], (std::pair<std::string, std::string>{"IB_TRAFFIC_CLASS", "40"}));
  // UCX accepts the per-class settings; on a host without IB they are simply unused.
  auto ctx = Context::create(kv);
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
}

TEST(TransportConfig, AnOutOfRangeServiceLevelNamesTheKey) {
  auto cfg = Config::from_string("[transport.kv]\nib_sl = 16\n", "t.toml");
  ASSERT_TRUE(cfg.is_ok());
  read_transport_config(*cfg);
  Status s = cfg->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("transport.kv.ib_sl"), std::string::npos) << s.message();
}

TEST(TransportConfig, ProgressThreadsSleepAtOnceByDefault) {
  auto cfg = Config::from_string("[transport]\ntls = \"sm,self\"\n", "t.toml");
  ASSERT_TRUE(cfg.is_ok());
  TransportConfig t = read_transport_config(*cfg);
  ASSERT_TRUE(cfg->finish().is_ok());
  EXPECT_EQ(t.poll_us, 0) << "no busy polling unless asked: engines share cores by default";
  EXPECT_EQ(t.poll_in_flight_us, -1);
  auto bad = Config::from_string("[transport]\npoll_us = -5\n", "t.toml");
  ASSERT_TRUE(bad.is_ok());
  read_transport_config(*bad);
  Status s = bad->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("transport.poll_us"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dualpath::transport
