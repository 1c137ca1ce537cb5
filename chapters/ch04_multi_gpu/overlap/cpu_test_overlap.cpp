// ch04:overlap — checked on the host: the axes' validation; the bucket assignment against DDP's rule on
// hand-worked cases (a cap larger than everything, smaller than one layer, exact fits and one byte past
// them) and its invariants over many shapes; the host reference on a case worked out by hand (which also
// pins the GEMM's orientation, dY^T X and not its transpose); the tolerances (values, and that fp32 sums
// and GEMM accumulations stay inside them, and a bf16 gradient does not); the declared FLOPs and bus bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/common/sum_order_gap.hpp"
#include "chapters/ch04_multi_gpu/overlap/reference.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::overlap {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(Ch04OverlapAxes, PhasesAndTheirWork) {
  EXPECT_EQ(phase_from_axis(0), Phase::step);
  EXPECT_EQ(phase_from_axis(1), Phase::compute);
  EXPECT_EQ(phase_from_axis(2), Phase::comms);
  EXPECT_THROW(phase_from_axis(3), UsageError);
  EXPECT_THROW(phase_from_axis(-1), UsageError);
  EXPECT_TRUE(runs_compute(Phase::step) && runs_comms(Phase::step));
  EXPECT_TRUE(runs_compute(Phase::compute) && !runs_comms(Phase::compute));
  EXPECT_TRUE(!runs_compute(Phase::comms) && runs_comms(Phase::comms));
}

TEST(Ch04OverlapAxes, ShapeLimits) {
  const Shape s = make_shape(16, 4096, 4096);
  EXPECT_EQ(s.layer_elements(), 4096u * 4096u);
  EXPECT_EQ(s.layer_bytes(), 64 * MiB);
  EXPECT_EQ(s.gradient_bytes(), 1024 * MiB);
  EXPECT_EQ(s.activation_elements(), 16u * 4096u * 4096u);
  EXPECT_NO_THROW(make_shape(1, 16, 16));
  EXPECT_THROW(make_shape(1, 8, 16), UsageError);  // slices off cuBLASLt's 256-byte alignment
  EXPECT_THROW(make_shape(0, 4096, 4096), UsageError);
  EXPECT_THROW(make_shape(16, 4100, 4096), UsageError);
  EXPECT_THROW(make_shape(16, 4096, 4090), UsageError);
  EXPECT_THROW(make_shape(16, 0, 4096), UsageError);
  EXPECT_THROW(make_shape(16, std::int64_t{1} << 32, 4096), UsageError);
  // Every layer's slice of X, dY and dW starts 256-byte aligned, as cuBLASLt's plan assumes.
  for (const int hidden : {16, 48, 4096}) {
    for (const int tokens : {16, 80, 4096}) {
      const Shape t = make_shape(1, hidden, tokens);
      EXPECT_EQ(t.activation_elements() * 2 % 256, 0u) << hidden << " x " << tokens;
      EXPECT_EQ(t.layer_bytes() % 256, 0u) << hidden;
    }
  }
  EXPECT_EQ(bucket_bytes_from_mb(25), 25 * MiB);
  EXPECT_THROW(bucket_bytes_from_mb(0), UsageError);
  EXPECT_THROW(bucket_bytes_from_mb(std::int64_t{1} << 21), UsageError);
  // The harness's path refuses one rank (common/ranks.hpp); the GPU test builds its problem around it.
  EXPECT_THROW(rank_devices(1, 2, 0, "ch04:overlap"), UsageError);
  EXPECT_EQ(rank_devices(0, 2, 1, "ch04:overlap"), (std::vector<int>{1, 0}));
  // 05's margin leaves the GEMMs at least one SM, and takes at least one.
  EXPECT_EQ(sm_margin_from_axis(16, 132), 16);
  EXPECT_EQ(sm_margin_from_axis(131, 132), 131);
  EXPECT_THROW(sm_margin_from_axis(132, 132), UsageError);
  EXPECT_THROW(sm_margin_from_axis(0, 132), UsageError);
}

// ---- buckets ----

TEST(Ch04OverlapBuckets, CapLargerThanEverything) {
  // 16 layers of 64 MiB, cap 2 GiB: DDP's 1 MiB first bucket takes the last layer alone, the rest is one.
  EXPECT_EQ(assign_buckets(16, 64 * MiB, 2048 * MiB), (std::vector<Bucket>{{15, 1}, {0, 15}}));
  // With the first bucket's limit as large, one bucket: 01's schedule.
  EXPECT_EQ(assign_buckets(16, 64 * MiB, 2048 * MiB, 2048 * MiB), (std::vector<Bucket>{{0, 16}}));
  // Layers smaller than the first limit: the first bucket gathers them up to 1 MiB (here all of them).
  EXPECT_EQ(assign_buckets(3, 16 * 1024, 25 * MiB), (std::vector<Bucket>{{0, 3}}));
}

TEST(Ch04OverlapBuckets, CapSmallerThanOneLayerIsOneLayerPerBucket) {
  // The defaults: 64 MiB gradients against DDP's 25 MiB: every layer alone, as 02's per_layer_buckets.
  EXPECT_EQ(assign_buckets(16, 64 * MiB, 25 * MiB), per_layer_buckets(16));
  EXPECT_EQ(per_layer_buckets(3), (std::vector<Bucket>{{2, 1}, {1, 1}, {0, 1}}));
  EXPECT_EQ(assign_buckets(4, 8 * MiB, 1, 1), per_layer_buckets(4));
}

TEST(Ch04OverlapBuckets, ExactFitsCloseTheBucket) {
  // 8 MiB layers, first limit 8 MiB, cap 24 MiB: each bucket closes exactly at its limit (>=).
  EXPECT_EQ(assign_buckets(16, 8 * MiB, 24 * MiB, 8 * MiB),
            (std::vector<Bucket>{{15, 1}, {12, 3}, {9, 3}, {6, 3}, {3, 3}, {0, 3}}));
  // One byte more and a bucket needs a fourth layer; the last takes what is left.
  EXPECT_EQ(assign_buckets(16, 8 * MiB, 24 * MiB + 1, 8 * MiB),
            (std::vector<Bucket>{{15, 1}, {11, 4}, {7, 4}, {3, 4}, {0, 3}}));
  // One byte under the first limit: the first bucket takes two layers.
  EXPECT_EQ(assign_buckets(4, 8 * MiB, 8 * MiB, 8 * MiB + 1), (std::vector<Bucket>{{2, 2}, {1, 1}, {0, 1}}));
}

TEST(Ch04OverlapBuckets, TheReadmesTable) {
  // The defaults' 64 MiB layers at bucket_mb = 25, 256 and 1024.
  EXPECT_EQ(assign_buckets(16, 64 * MiB, bucket_bytes_from_mb(25)).size(), 16u);
  EXPECT_EQ(assign_buckets(16, 64 * MiB, bucket_bytes_from_mb(256)),
            (std::vector<Bucket>{{15, 1}, {11, 4}, {7, 4}, {3, 4}, {0, 3}}));
  EXPECT_EQ(assign_buckets(16, 64 * MiB, bucket_bytes_from_mb(1024)), (std::vector<Bucket>{{15, 1}, {0, 15}}));
}

TEST(Ch04OverlapBuckets, SmallerLayersAtDdpsDefault) {
  // hidden = 2048: 16 MiB layers; the README's and 03's example, 32 layers at 25 MiB: one layer, fifteen
  // pairs (32 MiB), one layer.
  const auto b = assign_buckets(32, 16 * MiB, 25 * MiB);
  ASSERT_EQ(b.size(), 17u);
  EXPECT_EQ(b.front(), (Bucket{31, 1}));
  for (std::size_t i = 1; i + 1 < b.size(); ++i) EXPECT_EQ(b[i].layers, 2) << i;
  EXPECT_EQ(b.back(), (Bucket{0, 1}));
  // At 64 MiB: one layer, seven of four (exactly 64 MiB), three.
  const auto c = assign_buckets(32, 16 * MiB, 64 * MiB);
  ASSERT_EQ(c.size(), 9u);
  EXPECT_EQ(c[1], (Bucket{27, 4}));
  EXPECT_EQ(c.back(), (Bucket{0, 3}));
  // 4 MiB layers (hidden = 1024), 64 of them at 25 MiB: one layer, then nine buckets of seven (28 MiB).
  const auto d = assign_buckets(64, 4 * MiB, 25 * MiB);
  ASSERT_EQ(d.size(), 10u);
  for (std::size_t i = 1; i < d.size(); ++i) EXPECT_EQ(d[i].layers, 7) << i;
}

TEST(Ch04OverlapBuckets, EveryAssignmentCoversEveryLayerOnceInBackwardOrder) {
  EXPECT_TRUE(assign_buckets(0, MiB, MiB).empty());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 40);
    const std::size_t layer = 1 + rng() % (8 * MiB);
    const std::size_t cap = 1 + rng() % (64 * MiB), first = 1 + rng() % (4 * MiB);
    const auto buckets = assign_buckets(layers, layer, cap, first);
    ASSERT_FALSE(buckets.empty());
    int expect_top = layers - 1;  // the next bucket's highest layer
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const Bucket& b = buckets[i];
      ASSERT_GE(b.layers, 1);
      EXPECT_EQ(b.first_layer + b.layers - 1, expect_top) << "contiguous, in backward order";
      expect_top = b.first_layer - 1;
      const std::size_t limit = i == 0 ? first : cap;
      const std::size_t size = b.layers * layer;
      // Closed as soon as the limit was reached: without its last-produced layer it was under the limit.
      EXPECT_LT(size - layer, limit);
      if (i + 1 < buckets.size()) {
        EXPECT_GE(size, limit) << "only the last bucket may stay under its limit";
      }
    }
    EXPECT_EQ(expect_top, -1) << "every layer, once";
  }
}

// ---- the host reference ----

TEST(Ch04OverlapReference, WeightGradIsDyTransposedTimesX) {
  // tokens = 2, hidden = 2: dY = [[1, 2], [3, 4]], X = [[5, 6], [7, 8]] (rows are tokens).
  // dW[i][j] = sum_t dY[t][i] X[t][j]: [[1*5 + 3*7, 1*6 + 3*8], [2*5 + 4*7, 2*6 + 4*8]] = [[26, 30], [38, 44]];
  // X^T dY would be its transpose [[26, 38], [30, 44]].
  const std::vector<double> dy{1, 2, 3, 4}, x{5, 6, 7, 8};
  EXPECT_EQ(host_weight_grad(dy, x, 2, 2), (std::vector<double>{26, 30, 38, 44}));
  // tokens = 3, hidden = 1: a dot product.
  EXPECT_EQ(host_weight_grad(std::vector<double>{1, -2, 0.5}, std::vector<double>{4, 1, -2}, 3, 1),
            (std::vector<double>{1.0}));  // 4 - 2 - 1
}

TEST(Ch04OverlapReference, LayersLandInTheirSlicesAndRanksAdd) {
  // Two layers of tokens = 2, hidden = 2; layer 1's rows follow layer 0's.
  const Shape s{2, 2, 2};
  const std::vector<double> dy{1, 2, 3, 4, /* layer 1 */ 1, 0, 0, 1};
  const std::vector<double> x{5, 6, 7, 8, /* layer 1 */ 2, 3, 4, 5};
  // Layer 1: dY = identity, so dW = X = [[2, 3], [4, 5]].
  const auto rank0 = host_local_grads(dy, x, s);
  EXPECT_EQ(rank0, (std::vector<double>{26, 30, 38, 44, 2, 3, 4, 5}));
  // A second rank with dY negated and doubled: its gradients are -2 x rank 0's, the sum -1 x.
  std::vector<double> dy1 = dy;
  for (auto& v : dy1) v *= -2;
  const auto rank1 = host_local_grads(dy1, x, s);
  EXPECT_EQ(host_rank_sum({rank0, rank1}), (std::vector<double>{-26, -30, -38, -44, -2, -3, -4, -5}));
  EXPECT_EQ(host_rank_sum({rank0}), rank0);
  EXPECT_TRUE(host_rank_sum({}).empty());
}

// ---- tolerances ----

TEST(Ch04OverlapTolerance, Values) {
  EXPECT_DOUBLE_EQ(grad_bound(4096), 4096.0);
  EXPECT_DOUBLE_EQ(grad_bound(4000), 4096.0);
  EXPECT_DOUBLE_EQ(grad_bound(128), 128.0);
  EXPECT_DOUBLE_EQ(gemm_order_atol(4096), 16.0 * 4096 / 16777216);  // 3.9e-3
  // Two ranks at the defaults: both GEMM allowances plus one order difference of a 2-term sum below
  // 2^12, (2 - 1) 2^(1 + 12 - 24).
  EXPECT_DOUBLE_EQ(gate_atol(Phase::step, 2, 4096), 2 * gemm_order_atol(4096) + std::ldexp(1.0, -11));
  EXPECT_DOUBLE_EQ(gate_atol(Phase::compute, 8, 4096), gemm_order_atol(4096));  // ranks do not matter
  EXPECT_DOUBLE_EQ(gate_atol(Phase::comms, 8, 4096), fp32_sum_atol(8));    // stand-ins in [-1, 1]
  EXPECT_DOUBLE_EQ(gate_atol(Phase::comms, 1, 4096), 0.0);                 // a copy is exact
  EXPECT_DOUBLE_EQ(gate_atol(Phase::step, 1, 4096), gemm_order_atol(4096));  // one rank: the GEMM's only
  EXPECT_DOUBLE_EQ(host_check_atol(Phase::compute, 1, 128), 127 * std::ldexp(1.0, 7 - 24));
  for (int ranks = 1; ranks < 8; ++ranks) {
    EXPECT_LT(gate_atol(Phase::step, ranks, 4096), gate_atol(Phase::step, ranks + 1, 4096));
    EXPECT_LE(gate_atol(Phase::compute, ranks, 4096), gate_atol(Phase::step, ranks, 4096));
    EXPECT_LE(gate_atol(Phase::step, ranks, 4096), host_check_atol(Phase::step, ranks, 4096));
  }
}

// Rounds to bf16 (8 significant bits), to nearest even, as the device's fill does.
double to_bf16(double v) {
  if (v == 0) return 0;
  const int e = std::ilogb(v);
  const double ulp = std::ldexp(1.0, e - 7);
  return std::nearbyint(v / ulp) * ulp;
}

// fp32 accumulation of a[i] * b[i] in order, the products exact (bf16 x bf16).
float dot_fp32(const std::vector<double>& a, const std::vector<double>& b, bool reverse) {
  volatile float sum = 0.0f;  // volatile: every addition rounds in fp32, under the current rounding mode
  const std::size_t n = a.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = reverse ? n - 1 - k : k;
    sum = sum + static_cast<float>(a[i] * b[i]);
  }
  return sum;
}

TEST(Ch04OverlapTolerance, GemmAccumulationsStayInsideTheirBounds) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const int tokens : {128, 1024}) {
    double worst_order = 0, worst_truncated = 0;
    for (int element = 0; element < 300; ++element) {
      std::vector<double> a(tokens), b(tokens);
      for (int t = 0; t < tokens; ++t) {
        a[t] = to_bf16(u(rng));
        b[t] = to_bf16(u(rng));
      }
      double exact = 0;
      for (int t = 0; t < tokens; ++t) exact += a[t] * b[t];
      worst_order = std::max(worst_order, std::abs(static_cast<double>(dot_fp32(a, b, false) - dot_fp32(a, b, true))));
      std::fesetround(FE_TOWARDZERO);  // the truncating accumulator the rigorous bound allows
      const float truncated = dot_fp32(a, b, false);
      std::fesetround(FE_TONEAREST);
      worst_truncated = std::max(worst_truncated, std::abs(truncated - exact));
    }
    // Two orders differ by far less than the allowance (a random walk, not the worst case)...
    EXPECT_LT(worst_order, gemm_order_atol(tokens) / 4) << tokens;
    // ...and even a truncating accumulation stays inside the host check's rigorous bound.
    EXPECT_LE(worst_truncated, gemm_exact_atol(tokens)) << tokens;
    EXPECT_GT(worst_truncated, 0.0) << tokens;  // the test did round
  }
}

TEST(Ch04OverlapTolerance, RankSumsInAnyOrderStayInside) {
  // R terms of gradient size (below 2^k), summed forward and backward in fp32.
  for (const int tokens : {128, 4096}) {
    for (int ranks = 2; ranks <= 8; ++ranks) {
      EXPECT_LE(worst_sum_order_gap(ranks, static_cast<float>(tokens)), rank_sum_atol(ranks, grad_bound(tokens), 0.0))
          << ranks << " ranks, tokens " << tokens;
    }
  }
}

TEST(Ch04OverlapTolerance, ABf16GradientWouldFail) {
  // The tolerance is what keeps the gradients fp32: rounding a typical reduced element at the defaults
  // (R = 2: sqrt(2 x 4096 / 9) ~ 30) to bf16 moves it by up to half a bf16 ulp, 2^-4 near 30, several
  // times the atol (8.3e-3); most elements of a bf16 all-reduce would fail.
  const double typical = std::sqrt(2 * 4096 / 9.0);
  const double half_ulp = std::ldexp(1.0, std::ilogb(typical) - 8);
  EXPECT_DOUBLE_EQ(half_ulp, 0.0625);
  EXPECT_GT(half_ulp, 4 * gate_atol(Phase::step, 2, 4096));
  EXPECT_GT(std::abs(to_bf16(typical) - typical), gate_atol(Phase::step, 2, 4096));
}

// ---- declared work ----

TEST(Ch04OverlapWork, FlopsAndBusBytes) {
  const Shape s = make_shape(16, 4096, 4096);
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 16 * 4096.0 * 4096 * 4096);  // 2.2 TFLOP
  const double gib = 1024.0 * 1024 * 1024;
  // 1 GiB of fp32 gradients: bus bytes 1 GiB x 2 (R - 1) / R.
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(s, 2), gib);
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(s, 8), gib * 7 / 4);
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(s, 1), 0.0);  // nothing crosses a link
  // Any buckets move the same bus bytes as one flat all-reduce.
  for (const auto& buckets : {per_layer_buckets(16), assign_buckets(16, s.layer_bytes(), 200 * MiB)}) {
    double sum = 0;
    for (const Bucket& b : buckets) {
      sum += bus_bytes(Collective::all_reduce, 4, static_cast<double>(b.layers * s.layer_bytes()));
    }
    EXPECT_DOUBLE_EQ(sum, all_reduce_bus_bytes(s, 4));
  }
  // The napkin math of the README: GEMMs at 700 TFLOP/s and the all-reduce at 350 GB/s of bus bandwidth
  // take about the same time at the defaults on two GPUs (3.14 ms and 3.07 ms).
  EXPECT_NEAR(s.flops() / 700e12 * 1e3, 3.14, 0.01);
  EXPECT_NEAR(all_reduce_bus_bytes(s, 2) / 350e9 * 1e3, 3.07, 0.01);
}

}  // namespace
}  // namespace aisp::ch04::overlap
