#include "compute/cpu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compute/init_rng.h"

namespace dualpath::compute::kernels {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform_pm1();
  return v;
}

// Every path of the tiled matmul (4x16 tiles, right-edge columns, leftover rows, fewer than four
// rows) gives exactly the plain i-ascending float sum: the tiling never changes a result.
TEST(CpuKernels, MatmulEqualsThePlainSumBitForBitForEveryTileShape) {
  for (int64_t n : {1, 3, 4, 7, 64, 70}) {
    for (int64_t out : {5, 16, 40}) {
      const int64_t in = 37;
      const auto x = random_floats(static_cast<size_t>(n * in), 1);
      const auto w = random_floats(static_cast<size_t>(in * out), 2);
      std::vector<float> y(static_cast<size_t>(n * out));
      matmul(x.data(), n, in, w.data(), out, y.data());
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < out; ++c) {
          float want = 0.0f;
          for (int64_t i = 0; i < in; ++i) want += x[r * in + i] * w[i * out + c];
          ASSERT_EQ(y[r * out + c], want) << "n " << n << " out " << out << " at " << r << "," << c;
        }
      }
    }
  }
}

TEST(CpuKernels, ExpIsWithinTwoUlpsOfLibmAndTheTailMatchesTheVectorBody) {
  std::vector<float> xs;
  for (float x = -90.0f; x <= 0.0f; x += 0.0137f) xs.push_back(x);
  xs.push_back(0.0f);
  auto e = xs;
  exp_nonpositive(e.data(), static_cast<int64_t>(e.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = std::exp(std::max(xs[i], -87.0f));
    EXPECT_NEAR(e[i], want, 2.5e-7f * want) << "x " << xs[i];
    // The same value through the scalar tail (a one-element call).
    float one = xs[i];
    exp_nonpositive(&one, 1);
    EXPECT_EQ(one, e[i]) << "x " << xs[i];
  }
}

}  // namespace
}  // namespace dualpath::compute::kernels
