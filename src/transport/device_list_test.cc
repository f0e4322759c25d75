#include "transport/device_list.h"

#include <gtest/gtest.h>

#include "transport/context.h"

namespace dualpath::transport {
namespace {

TEST(DeviceList, FindsTheLoopbackDeviceForTcp) {
  auto devices = list_ucx_devices();
  ASSERT_TRUE(devices.is_ok()) << devices.status().to_string();
  bool lo = false;
  for (const auto& d : *devices) lo = lo || d.name == "lo";
  EXPECT_TRUE(lo) << describe_devices(*devices);
}

TEST(DeviceList, AMissingDeviceIsNotFoundAndTheErrorListsTheAvailableOnes) {
  auto devices = list_ucx_devices();
  ASSERT_TRUE(devices.is_ok());
  Status s = check_net_devices("lo,mlx5_7:1", *devices);
  EXPECT_TRUE(s.is_not_found()) << s.to_string();
  EXPECT_NE(s.message().find("'mlx5_7:1'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("lo (tcp"), std::string::npos) << s.message();
  EXPECT_TRUE(check_net_devices("all", *devices).is_ok());
  EXPECT_TRUE(check_net_devices("lo", *devices).is_ok());
}

TEST(DeviceList, ContextCreationFailsClearlyOnAMissingDevice) {
  ContextOptions o;
  o.transports = "tcp,self";
  o.net_devices = "mlx5_0:1";
  auto ctx = Context::create(o);
  ASSERT_FALSE(ctx.is_ok());
  EXPECT_TRUE(ctx.status().is_not_found()) << ctx.status().to_string();
  EXPECT_NE(ctx.status().message().find("available devices"), std::string::npos);
}

TEST(DeviceList, ABadUcxSettingValueIsAnInvalidArgument) {
  ContextOptions o;
  o.transports = "sm,self";
  o.settings = {{"RNDV_THRESH", "not-a-size"}};
  auto ctx = Context::create(o);
  ASSERT_FALSE(ctx.is_ok());
  EXPECT_TRUE(ctx.status().is_invalid_argument()) << ctx.status().to_string();
}

}  // namespace
}  // namespace dualpath::transport
