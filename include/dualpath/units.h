#pragma once
// Units: time is std::chrono; quantities carry their unit in the name (STYLE.md).
// GB means 1e9 bytes, GiB 2^30; Gb/s means 1e9 bits per second.

#include <chrono>
#include <cstdint>

namespace dualpath {

using Duration = std::chrono::nanoseconds;
using Seconds = std::chrono::duration<double>;

inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kTFLOP = 1e12;
inline constexpr double kPFLOP = 1e15;

// Network speeds are quoted in Gb/s (bits); the code moves bytes.
constexpr double gbps_to_bytes_per_s(double gbps) { return gbps * 1e9 / 8.0; }
constexpr double bytes_per_s_to_gbps(double bytes_per_s) { return bytes_per_s * 8.0 / 1e9; }

constexpr double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
constexpr Duration from_seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

}  // namespace dualpath
