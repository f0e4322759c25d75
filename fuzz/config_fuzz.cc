// The TOML config reader on any bytes: every section a config file may hold, the seed
// deployment guide's aliases included, read as `dualpath serve` reads a file. A bad document or
// value must come back as a Status, never as an exception or a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/config.h"
#include "serve/serve_config.h"
#include "serve/serve_guide.h"
#include "sim/sim_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dualpath;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto file = Config::from_string(text, "fuzz.toml");
  if (!file.is_ok()) return 0;
  serve::ServeConfig cfg;
  (void)serve::apply_guide_config(*file, cfg);
  (void)serve::apply_serve_config(*file, cfg);
  auto sim = sim::default_sim_config("tiny");
  if (sim.is_ok()) (void)sim::apply_config(*file, *sim);
  (void)file->finish();
  return 0;
}
