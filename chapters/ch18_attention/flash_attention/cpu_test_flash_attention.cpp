// ch18:flash_attention — the host reference on cases whose answer is known without it.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "chapters/ch18_attention/flash_attention/reference.hpp"

namespace aisp::ch18::flash_attention {
namespace {

// Deterministic, varied values in [-1, 1): enough for cases whose expectation is structural.
std::vector<double> ramp(std::size_t n, double step) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::fmod(0.37 + step * static_cast<double>(i), 2.0) - 1.0;
  return x;
}

TEST(FlashAttentionReference, UniformScoresGiveTheMeanOfTheValueRows) {
  // Q = 0 makes every score 0: each query weights all keys equally, O = the mean of V's rows.
  const Shape shape{.batch = 1, .heads = 1, .kv_heads = 1, .seq = 5, .head_dim = 4};
  const std::vector<double> q(shape.q_count(), 0.0);
  const std::vector<double> k = ramp(shape.kv_count(), 0.31), v = ramp(shape.kv_count(), 0.17);
  const auto o = attention_forward(q, k, v, shape);
  for (int i = 0; i < shape.seq; ++i) {
    for (int c = 0; c < shape.head_dim; ++c) {
      double mean = 0;
      for (int j = 0; j < shape.seq; ++j) mean += v[j * shape.head_dim + c] / shape.seq;
      EXPECT_NEAR(o[i * shape.head_dim + c], mean, 1e-15) << "row " << i << " col " << c;
    }
  }
}

TEST(FlashAttentionReference, CausalRowsSeeOnlyTheirPast) {
  const Shape shape{.batch = 1, .heads = 1, .kv_heads = 1, .seq = 6, .head_dim = 8, .causal = true};
  const std::vector<double> q = ramp(shape.q_count(), 0.23), k = ramp(shape.kv_count(), 0.41);
  std::vector<double> v = ramp(shape.kv_count(), 0.13);
  const auto o = attention_forward(q, k, v, shape);
  // Row 0 sees key 0 alone: its weight is exactly 1, O[0] = V[0].
  for (int c = 0; c < shape.head_dim; ++c) EXPECT_DOUBLE_EQ(o[c], v[c]);
  // Changing the last key's value row changes the last output row only.
  for (int c = 0; c < shape.head_dim; ++c) v[(shape.seq - 1) * shape.head_dim + c] += 0.5;
  const auto o2 = attention_forward(q, k, v, shape);
  for (int i = 0; i < shape.seq; ++i) {
    bool any_changed = false;
    for (int c = 0; c < shape.head_dim; ++c) {
      const std::size_t at = static_cast<std::size_t>(i) * shape.head_dim + c;
      if (i < shape.seq - 1) {
        EXPECT_EQ(o2[at], o[at]) << "row " << i;
      }
      any_changed |= o2[at] != o[at];
    }
    if (i == shape.seq - 1) {
      EXPECT_TRUE(any_changed);
    }
  }
  // Without the mask every row depends on the last key.
  Shape full = shape;
  full.causal = false;
  EXPECT_NE(attention_forward(q, k, v, full)[0], o2[0]);
}

TEST(FlashAttentionReference, GroupedQueryHeadsShareTheirKeyValueHead) {
  // 4 query heads over 2 K/V heads: heads 0, 1 read K/V head 0, heads 2, 3 read K/V head 1. With Q = 0
  // each output is the mean of its K/V head's rows: all 1 for K/V head 0, all -2 for K/V head 1.
  const Shape shape{.batch = 2, .heads = 4, .kv_heads = 2, .seq = 3, .head_dim = 2};
  const std::vector<double> q(shape.q_count(), 0.0), k = ramp(shape.kv_count(), 0.29);
  std::vector<double> v(shape.kv_count());
  const std::size_t head_size = static_cast<std::size_t>(shape.seq) * shape.head_dim;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (i / head_size) % 2 == 0 ? 1.0 : -2.0;
  const auto o = attention_forward(q, k, v, shape);
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads; ++h) {
      const double want = h < 2 ? 1.0 : -2.0;
      for (std::size_t e = 0; e < head_size; ++e) {
        EXPECT_DOUBLE_EQ(o[(static_cast<std::size_t>(b) * shape.heads + h) * head_size + e], want)
            << "batch " << b << " head " << h;
      }
    }
  }
}

TEST(FlashAttentionReference, ScoresAreScaledByOneOverSqrtHeadDim) {
  // head_dim 4 (scale 1/2), two keys: k0 = 0, k1 = (1,1,1,1); q = (x,x,x,x) gives scores 0 and 2x. With
  // x = ln(3)/2 the weights are 1/4 and 3/4, so O = V[0]/4 + 3 V[1]/4.
  const Shape shape{.batch = 1, .heads = 1, .kv_heads = 1, .seq = 2, .head_dim = 4};
  const double x = std::log(3.0) / 2;
  std::vector<double> q(shape.q_count(), x), k(shape.kv_count(), 0.0);
  for (int c = 0; c < 4; ++c) k[4 + c] = 1.0;
  const std::vector<double> v = {1, 2, 3, 4, -4, 8, 0, 1};
  const auto o = attention_forward(q, k, v, shape);
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(o[c], 0.25 * v[c] + 0.75 * v[4 + c], 1e-14);
}

TEST(FlashAttentionReference, LargeScoresDoNotOverflow) {
  // Scores of ~1e3 overflow exp() in double; subtracting the row max first keeps them finite. Equal
  // keys tie, so each row is the mean of the two value rows.
  const Shape shape{.batch = 1, .heads = 1, .kv_heads = 1, .seq = 2, .head_dim = 1};
  const auto o = attention_forward({1000.0, 1000.0}, {1000.0, 1000.0}, {2.0, 4.0}, shape);
  EXPECT_DOUBLE_EQ(o[0], 3.0);
  EXPECT_DOUBLE_EQ(o[1], 3.0);
}

}  // namespace
}  // namespace aisp::ch18::flash_attention
