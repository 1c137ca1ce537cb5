// The workload, the feature, the host reference and the tolerance of ch12:work_queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "chapters/ch12_graphs/work_queue/reference.hpp"

namespace {

using namespace aisp::ch12::work_queue;

TEST(WorkQueueWorkload, LengthsAreBoundedAndFixedBySeed) {
  const auto a = make_lengths(5000, Order::shuffled);
  const auto b = make_lengths(5000, Order::shuffled);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, make_lengths(5000, Order::shuffled, k_shape_seed + 1));
  for (const auto l : a) {
    EXPECT_GE(l, k_min_len);
    EXPECT_LE(l, k_max_len);
  }
}

TEST(WorkQueueWorkload, OrdersArePermutationsOfTheSameBatch) {
  auto shuffled = make_lengths(4000, Order::shuffled);
  const auto longest = make_lengths(4000, Order::longest_first);
  const auto shortest = make_lengths(4000, Order::shortest_first);
  EXPECT_TRUE(std::is_sorted(longest.begin(), longest.end(), std::greater<>()));
  EXPECT_TRUE(std::is_sorted(shortest.begin(), shortest.end()));
  EXPECT_FALSE(std::is_sorted(shuffled.begin(), shuffled.end()));
  std::sort(shuffled.begin(), shuffled.end());
  EXPECT_EQ(shuffled, shortest);
}

TEST(WorkQueueWorkload, TheTailCarriesMuchOfTheWork) {
  // Heavy-tailed: the longest 5% of the default batch hold far more than 5% of the elements, and the
  // longest items reach the cap.
  auto len = make_lengths(16384, Order::longest_first);
  const double total = std::accumulate(len.begin(), len.end(), 0.0);
  const double top = std::accumulate(len.begin(), len.begin() + len.size() / 20, 0.0);
  EXPECT_GT(top / total, 0.25);
  EXPECT_GT(len.front(), k_max_len / 2);
  EXPECT_GT(total / static_cast<double>(len.size()), 2000.0);
  EXPECT_LT(total / static_cast<double>(len.size()), 6000.0);
}

// The static split's most loaded block against the mean block, for a grid of `blocks`.
double static_imbalance(const std::vector<std::int32_t>& len, int blocks) {
  const std::size_t per_block = (len.size() + blocks - 1) / blocks;
  double worst = 0, total = 0;
  for (std::size_t first = 0; first < len.size(); first += per_block) {
    const auto last = std::min(len.size(), first + per_block);
    const double work = std::accumulate(len.begin() + first, len.begin() + last, 0.0);
    worst = std::max(worst, work);
    total += work;
  }
  return worst / (total / blocks);
}

TEST(WorkQueueWorkload, TheStaticSplitIsUnevenAtTheDefaultShape) {
  // One wave of 8 blocks on each of 132 SMs (an H100/H200 at full occupancy): the lesson's premise.
  const int blocks = 132 * 8;
  const double shuffled = static_imbalance(make_lengths(16384, Order::shuffled), blocks);
  const double sorted = static_imbalance(make_lengths(16384, Order::longest_first), blocks);
  EXPECT_GT(shuffled, 2.0);  // some range of 16 items holds twice the mean range's work or more
  EXPECT_GT(sorted, 8.0);    // the first range holds the 16 longest items
  EXPECT_GT(sorted, shuffled);
}

TEST(WorkQueueReference, OffsetsArePrefixSums) {
  const std::vector<std::int32_t> len = {3, 1, 4};
  EXPECT_EQ(make_offsets(len), (std::vector<std::int64_t>{0, 3, 4, 8}));
}

TEST(WorkQueueReference, FeatureIsTheTruncatedSeries) {
  EXPECT_EQ(feature_reference(0.0f), 1.0f);  // only c_0 = 1 survives
  for (const float x : {0.1f, 0.5f, 0.9f}) {
    double want = 0;
    for (int k = 0; k <= k_degree; ++k) want += std::pow(static_cast<double>(x), k) / (k + 1);
    EXPECT_NEAR(feature_reference(x), want, 1e-5 * want) << x;
  }
  // Positive and bounded on [0, 1): the sums are of positive terms.
  EXPECT_GT(feature_reference(0.999f), 1.0f);
  EXPECT_LT(feature_reference(0.999f), 6.0f);
}

TEST(WorkQueueReference, ItemSumAddsTheFeatures) {
  const std::vector<float> x = {0.0f, 0.0f, 0.5f, 0.25f};
  EXPECT_EQ(item_sum_reference(x.data(), 0, 2), 2.0);
  EXPECT_EQ(item_sum_reference(x.data(), 2, 4),
            static_cast<double>(feature_reference(0.5f)) + static_cast<double>(feature_reference(0.25f)));
  EXPECT_EQ(item_sum_reference(x.data(), 1, 1), 0.0);
}

// The kernels' fp32 summation order (reference.hpp, k_serial_adds), replayed on the host.
float kernel_order_sum(const std::vector<float>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> thread_sums(k_block_threads, 0.0f);
  for (int t = 0; t < k_block_threads; ++t) {
    float s = 0.0f;
    for (std::int64_t base = t; base < n; base += 4 * k_block_threads) {
      for (int u = 0; u < 4; ++u) {
        const std::int64_t j = base + u * k_block_threads;
        s += j < n ? feature_reference(x[static_cast<std::size_t>(j)]) : 0.0f;
      }
    }
    thread_sums[static_cast<std::size_t>(t)] = s;
  }
  float total = 0.0f;
  for (int w = 0; w < k_block_threads / 32; ++w) {
    std::vector<float> lane(thread_sums.begin() + w * 32, thread_sums.begin() + (w + 1) * 32);
    for (int offset = 16; offset > 0; offset /= 2) {  // the butterfly: every lane ends with the same sum
      std::vector<float> next(32);
      for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ offset];
      lane = next;
    }
    total = w == 0 ? lane[0] : total + lane[0];
  }
  return total;
}

TEST(WorkQueueTolerance, CoversTheKernelOrderOnTheLongestItem) {
  std::uint64_t state = 42;
  std::vector<float> x(k_max_len);
  for (auto& v : x) v = static_cast<float>(static_cast<double>(splitmix64(state) >> 40) * 0x1.0p-24);
  const double exact = item_sum_reference(x.data(), 0, static_cast<std::int64_t>(x.size()));
  const auto ref = static_cast<float>(exact);
  const float got = kernel_order_sum(x);
  const double rtol = relative_tolerance();
  EXPECT_LE(std::fabs(got - ref), rtol * std::fabs(ref));
  // The bound is a worst case: the real error of the kernel's order is well inside it. It is still tight
  // where it matters: a short item missing one element (>= 1 / (5 * 1,024) relative), a missing round of
  // 1,024 elements in a long one (>= 1 / 64), or an unwritten item (NaN) all fail.
  EXPECT_LT(std::fabs(got - ref), rtol * std::fabs(ref) / 4);
  EXPECT_LT(rtol, 2e-5);
  EXPECT_GT(rtol, 1e-5);
}

}  // namespace
