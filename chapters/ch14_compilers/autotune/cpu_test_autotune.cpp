// ch14:autotune's host side: the candidate list, the winner rule, the winner's cache key, and the host
// reference and tolerance of the GEMM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "chapters/ch14_compilers/autotune/reference.hpp"
#include "chapters/ch14_compilers/autotune/tiles.hpp"

namespace {

using namespace aisp::ch14;
using namespace aisp::ch14::autotune;

TEST(Ch14AutotuneTiles, CandidatesAreDistinctAndShareTheThreadLayout) {
  std::set<std::string> names;
  for (const TileConfig& t : k_tiles) {
    names.insert(t.name());
    EXPECT_EQ((t.bm / t.tm) * (t.bn / t.tn), k_tile_threads) << t.name();
    EXPECT_EQ(t.bn / t.tn, 16) << t.name();
    EXPECT_EQ(t.bm % t.tm, 0) << t.name();
    EXPECT_EQ(t.bm * t.bk % k_tile_threads, 0) << t.name();
    EXPECT_EQ(t.bk * t.bn % k_tile_threads, 0) << t.name();
  }
  EXPECT_EQ(names.size(), k_tiles.size());
  EXPECT_EQ(k_tiles[k_default_tile].name(), "128x128x8_8x8");
}

TEST(Ch14AutotuneTiles, NamesMapBackToTheirIndex) {
  for (std::size_t i = 0; i < k_tiles.size(); ++i) EXPECT_EQ(tile_index(k_tiles[i].name()), static_cast<int>(i));
  EXPECT_FALSE(tile_index("").has_value());
  EXPECT_FALSE(tile_index("128x128x8_8x8\n").has_value());
  EXPECT_FALSE(tile_index("256x256x8_16x16").has_value());
}

TEST(Ch14AutotuneWinner, TheFastestWinsByMoreThanTheMargin) {
  EXPECT_EQ(pick_winner({2.0, 1.5, 1.2, 0.9, 1.0, 1.1}, 0), 3);
  EXPECT_EQ(pick_winner({1.0, 2.0, 3.0}, 0), 0);  // the default is fastest
}

TEST(Ch14AutotuneWinner, ATieWithinTheMarginKeepsTheDefault) {
  EXPECT_EQ(pick_winner({1.00, 0.98, 1.5}, 0), 0);         // 2% faster: noise, not a win
  EXPECT_EQ(pick_winner({1.00, 0.96, 1.5}, 0), 1);         // 4% faster: a win
  EXPECT_EQ(pick_winner({1.00, 0.98, 1.5}, 0, 0.0), 1);    // no margin: the strictly fastest
  EXPECT_EQ(pick_winner({1.0, 0.5, 0.5}, 0), 1);           // equals: the lower index
}

TEST(Ch14AutotuneWinner, UntimedCandidatesNeverWin) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(pick_winner({1.0, nan, 0.0, -1.0, inf, 0.5}, 0), 5);
  EXPECT_EQ(pick_winner({nan, 2.0, 1.0}, 0), 2);  // default untimed: the fastest timed one
  EXPECT_EQ(pick_winner({nan, nan}, 0), 0);       // nothing timed: the default
  EXPECT_EQ(pick_winner({}, 0), 0);
}

TEST(Ch14AutotuneKey, DeviceShapeAndCandidatesAllMatter) {
  const CacheKey base = winner_key("NVIDIA H100 80GB HBM3", 90, 256, 4096, 4096);
  EXPECT_NE(base.text().find("candidates=" + tile_list() + "\n"), std::string::npos);
  EXPECT_NE(base.text().find("m=256\nn=4096\nk=4096\n"), std::string::npos);
  for (const CacheKey& k : {winner_key("NVIDIA H200", 90, 256, 4096, 4096), winner_key("NVIDIA H100 80GB HBM3", 100, 256, 4096, 4096),
                            winner_key("NVIDIA H100 80GB HBM3", 90, 1024, 4096, 4096),
                            winner_key("NVIDIA H100 80GB HBM3", 90, 256, 2048, 4096),
                            winner_key("NVIDIA H100 80GB HBM3", 90, 256, 4096, 2048)}) {
    EXPECT_NE(k.file_name("autotune"), base.file_name("autotune")) << k.text();
  }
  EXPECT_EQ(base.file_name("autotune"), winner_key("NVIDIA H100 80GB HBM3", 90, 256, 4096, 4096).file_name("autotune"));
}

TEST(Ch14AutotuneReference, SmallProductIsExact) {
  // [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50]
  const auto c = gemm_reference(std::vector<float>{1, 2, 3, 4}, std::vector<float>{5, 6, 7, 8}, 2, 2, 2);
  EXPECT_EQ(c, (std::vector<double>{19, 22, 43, 50}));
  // Non-square: (1 x 3) (3 x 2)
  const auto d = gemm_reference(std::vector<float>{1, 0, -1}, std::vector<float>{1, 2, 3, 4, 5, 6}, 1, 2, 3);
  EXPECT_EQ(d, (std::vector<double>{-4, -4}));
}

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// An FP32 dot product in the order a tiled kernel uses (one running FMA accumulator).
float fp32_dot(const std::vector<float>& a, const std::vector<float>& b) {
  float acc = 0;
  for (std::size_t i = 0; i < a.size(); ++i) acc = std::fma(a[i], b[i], acc);
  return acc;
}

// TF32 keeps 10 explicit mantissa bits: round each input to nearest.
float to_tf32(float x) {
  const int shift = 13;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + (1u << (shift - 1))) & ~((1u << shift) - 1);
  std::memcpy(&x, &u, sizeof u);
  return x;
}

TEST(Ch14AutotuneTolerance, PassesFp32WithMarginAndFailsTf32AndASkippedStep) {
  const int k = 4096;
  const double atol = gemm_atol(k);
  double worst = 0;
  int tf32_fails = 0, skipped_fails = 0;
  double tf32_sq = 0;
  const int trials = 64;
  for (int t = 0; t < trials; ++t) {
    const auto a = uniform(k, 2 * t + 1), b = uniform(k, 2 * t + 2);
    double exact = 0;
    for (int i = 0; i < k; ++i) exact += static_cast<double>(a[i]) * b[i];
    worst = std::max(worst, std::fabs(fp32_dot(a, b) - exact));
    std::vector<float> at(a), bt(b);
    for (auto& x : at) x = to_tf32(x);
    for (auto& x : bt) x = to_tf32(x);
    double tf32 = 0;
    for (int i = 0; i < k; ++i) tf32 += static_cast<double>(at[i]) * bt[i];
    tf32_fails += std::fabs(tf32 - exact) > atol;
    tf32_sq += (tf32 - exact) * (tf32 - exact);
    double skipped = 0;  // one BK = 8 step left out
    for (int i = 8; i < k; ++i) skipped += static_cast<double>(a[i]) * b[i];
    skipped_fails += std::fabs(skipped - exact) > atol;
  }
  EXPECT_LT(worst, atol / 10) << "FP32 error " << worst << " vs atol " << atol;
  // TF32's error is about atol's size, so a good share of the outputs of any real matrix fail: the gate
  // compares every one of them, and one failure fails the variant.
  const double tf32_rms = std::sqrt(tf32_sq / trials);
  EXPECT_GT(tf32_rms, atol / 2) << "TF32 error rms " << tf32_rms;
  EXPECT_GT(tf32_fails, trials / 5) << "TF32 inputs should often fail";
  EXPECT_GT(skipped_fails, trials * 9 / 10) << "a skipped k step should fail";
}

}  // namespace
