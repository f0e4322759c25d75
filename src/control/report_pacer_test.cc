#include "control/report_pacer.h"

#include <gtest/gtest.h>

namespace dualpath::control {
namespace {

using std::chrono::milliseconds;

TEST(ReportPacer, AnUnchangedReportWaitsForTheHeartbeatAChangedOneGoesAtOnce) {
  ReportPacer p(milliseconds(250));
  EXPECT_TRUE(p.due(false, milliseconds(100)));  // the first report always goes
  p.sent(milliseconds(100));
  EXPECT_FALSE(p.due(false, milliseconds(200)));
  EXPECT_FALSE(p.due(false, milliseconds(349)));
  EXPECT_TRUE(p.due(true, milliseconds(200)));   // the load moved
  EXPECT_TRUE(p.due(false, milliseconds(350)));  // a heartbeat since the last one sent
  p.sent(milliseconds(350));
  EXPECT_FALSE(p.due(false, milliseconds(450)));
}

TEST(ReportPacer, NoHeartbeatSendsEveryInterval) {
  ReportPacer p(milliseconds(0));
  p.sent(milliseconds(100));
  EXPECT_TRUE(p.due(false, milliseconds(100)));
  EXPECT_TRUE(p.due(false, milliseconds(200)));
}

}  // namespace
}  // namespace dualpath::control
