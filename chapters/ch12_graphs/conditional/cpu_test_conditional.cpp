// The iteration, the convergence test and the host loop of ch12:conditional.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch12_graphs/conditional/reference.hpp"

namespace {

using namespace aisp::ch12::conditional;

// The root of x = c / (1 + x), x > 0.
double root(double c) { return (-1.0 + std::sqrt(1.0 + 4.0 * c)) / 2.0; }

TEST(ConditionalReference, ConvergesToTheRoot) {
  // c = 2: root 1; c = 6: root 2; c = 380: root 19.
  const auto s = solve_reference({2.0f, 6.0f, 380.0f}, 10000);
  ASSERT_EQ(s.x.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const double want = root(std::vector<double>{2, 6, 380}[i]);
    // Stopped when a step moved it by <= 1e-5 relative: within rate / (1 - rate) of that of the root.
    EXPECT_NEAR(s.x[i], want, 20 * 1e-5 * want) << i;
  }
  EXPECT_LT(s.iterations, 10000);
}

TEST(ConditionalReference, StopsAtTheFirstIterationInWhichNothingMoved) {
  const std::vector<float> c = {2.0f, 30.0f};
  const auto s = solve_reference(c, 10000);
  // Replay by hand: iteration k = s.iterations moved nothing, iteration k - 1 moved something.
  std::vector<float> x(c.size(), 0.0f);
  bool moved_last = false, moved_before = false;
  for (std::int32_t k = 1; k <= s.iterations; ++k) {
    bool moved = false;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const float next = iterate(c[i], x[i]);
      moved = moved || still_moving(x[i], next);
      x[i] = next;
    }
    moved_before = moved_last;
    moved_last = moved;
  }
  EXPECT_FALSE(moved_last);
  EXPECT_TRUE(moved_before);
  EXPECT_EQ(x, s.x);  // same arithmetic, same bits
}

TEST(ConditionalReference, TheSlowestElementSetsTheLoop) {
  // Elements that converged early keep iterating with the rest: the loop runs as long as the slowest.
  const auto fast = solve_reference({2.0f}, 10000);
  const auto slow = solve_reference({380.0f}, 10000);
  const auto both = solve_reference({2.0f, 380.0f}, 10000);
  EXPECT_LT(fast.iterations, slow.iterations);
  EXPECT_EQ(both.iterations, slow.iterations);
  EXPECT_EQ(both.x[1], slow.x[0]);
}

TEST(ConditionalReference, TheCapStopsTheLoop) {
  const auto s = solve_reference({380.0f, 100.0f}, 7);
  EXPECT_EQ(s.iterations, 7);
  const auto one = solve_reference({380.0f}, 1);
  EXPECT_EQ(one.iterations, 1);
  EXPECT_EQ(one.x[0], 380.0f);  // x1 = c / (1 + 0)
}

TEST(ConditionalReference, ADrawnArrayTakesHundredsOfIterations) {
  // The problem's inputs at the default size: the lesson needs a long loop (a few hundred round trips).
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> d(k_c_lo, k_c_hi);
  std::vector<float> c(std::size_t{1} << 16);
  for (auto& v : c) v = static_cast<float>(d(rng));
  const auto s = solve_reference(c, 10000);
  EXPECT_GT(s.iterations, 150);
  EXPECT_LT(s.iterations, 1000);
}

TEST(ConditionalReference, StillMovingIsRelative) {
  EXPECT_TRUE(still_moving(1.0f, 1.0001f));
  EXPECT_FALSE(still_moving(1.0f, 1.000001f));
  EXPECT_TRUE(still_moving(1000.0f, 1000.1f));
  EXPECT_FALSE(still_moving(1000.0f, 1000.001f));
}

}  // namespace
