// ch19:kv_quant — the host reference on cases small enough to check by hand: the cache quantizer (scales
// per (sequence, KV head), codes, the all-zero block), dequantization, decode attention over the
// contiguous layout with grouped-query heads, and the relative error measure of the facts.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "chapters/ch19_low_precision/kv_quant/reference.hpp"

namespace aisp::ch19::kv_quant {
namespace {

TEST(Ch19KvQuantReference, ScalesArePerSequenceAndKvHead) {
  // 2 sequences x 2 KV heads, 2 tokens of 2 dims: four blocks of 4 values, each with its own amax.
  const Shape s{.batch = 2, .context = 2, .heads = 2, .kv_heads = 2, .head_dim = 2};
  std::vector<float> x(s.kv_count(), 0.0f);
  const float amax[4] = {448.0f, 2.0f, 0.0f, 0.5f};  // block (b, kvh) = b * 2 + kvh; block 2 all zero
  for (int blk = 0; blk < 4; ++blk) {
    if (amax[blk] == 0.0f) continue;
    x[s.kv_index(blk / 2, blk % 2, 1, 0)] = -amax[blk];  // the largest magnitude, negative
    x[s.kv_index(blk / 2, blk % 2, 0, 1)] = amax[blk] / 2;
  }
  const QuantizedCache q = quantize_cache(s, x);
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[0], 1.0f);          // 448 / 448
  EXPECT_EQ(q.scales[1], 2.0f / 448.0f);
  EXPECT_EQ(q.scales[2], 1.0f);          // all zero: scale 1
  EXPECT_EQ(q.scales[3], 0.5f / 448.0f);
  for (int blk = 0; blk < 4; ++blk) {
    const int b = blk / 2, kvh = blk % 2;
    if (amax[blk] == 0.0f) {
      for (int t = 0; t < 2; ++t) {
        for (int d = 0; d < 2; ++d) EXPECT_EQ(q.codes[s.kv_index(b, kvh, t, d)], 0x00);
      }
      continue;
    }
    // -amax maps onto -448 (0xFE), amax / 2 onto 224 (1.75 * 2^7: exponent 14, mantissa 6 = 0x76).
    EXPECT_EQ(q.codes[s.kv_index(b, kvh, 1, 0)], 0xFE) << blk;
    EXPECT_EQ(q.codes[s.kv_index(b, kvh, 0, 1)], 0x76) << blk;
    EXPECT_EQ(q.codes[s.kv_index(b, kvh, 0, 0)], 0x00) << blk;
  }
  // Back: the block's extremes come back exactly, each with its own block's scale.
  const auto y = dequantize_cache(s, q.codes, q.scales);
  for (int blk = 0; blk < 4; ++blk) {
    EXPECT_EQ(y[s.kv_index(blk / 2, blk % 2, 1, 0)], -amax[blk]) << blk;
    EXPECT_EQ(y[s.kv_index(blk / 2, blk % 2, 0, 1)], amax[blk] / 2) << blk;
  }
}

TEST(Ch19KvQuantReference, QuantizationRoundsRelativeToTheBlockScale) {
  // One block with amax 4.48: scale ~0.01. At exponent 6 the e4m3 spacing is 8: 96 is 0x6C (1.100b * 2^6)
  // and 104 is 0x6D (1.101b * 2^6). 1.03 / 0.01 = 103 rounds to 104. 1.0 / 0.01 = 100 is the midpoint,
  // which goes to the even code 96; the float scale is a hair off 0.01, so the quotient may fall just
  // above 100 (then 104) or just below (96).
  const Shape s{.batch = 1, .context = 3, .heads = 1, .kv_heads = 1, .head_dim = 1};
  const std::vector<float> x = {4.48f, 1.0f, 1.03f};
  const QuantizedCache q = quantize_cache(s, x);
  EXPECT_FLOAT_EQ(q.scales[0], 0.01f);
  EXPECT_EQ(q.codes[0], 0x7E);
  EXPECT_EQ(q.codes[2], 0x6D);
  const float one = 1.0f / q.scales[0];  // as the quantizer divides
  EXPECT_EQ(q.codes[1], one > 100.0f ? 0x6D : 0x6C);
  const auto y = dequantize_cache(s, q.codes, q.scales);
  EXPECT_NEAR(y[2], 1.04, 1e-6);
  EXPECT_NEAR(y[0], 4.48, 1e-6);
}

TEST(Ch19KvQuantReference, TwoTokensSplitByTheirExponentials) {
  // head_dim 1 (scale 1): scores 0 and ln 3 weigh the tokens 1/4 and 3/4.
  const Shape s{.batch = 1, .context = 2, .heads = 1, .kv_heads = 1, .head_dim = 1};
  const std::vector<double> q = {std::log(3.0)}, k = {0.0, 1.0}, v = {10.0, 20.0};
  EXPECT_NEAR(decode_attention(s, q, k, v)[0], 0.25 * 10.0 + 0.75 * 20.0, 1e-12);
}

TEST(Ch19KvQuantReference, QueryHeadsReadTheirGroupsKvHeadInTheirSequence) {
  // 4 query heads over 2 KV heads, 2 sequences: heads 0, 1 read KV head 0 and heads 2, 3 KV head 1, each
  // in its own sequence's block. Each (sequence, KV head) has a different dominant token and different
  // values, so the K and the V indexing both show. Score of the dominant token: 100 / sqrt(2) ~ 71, the
  // others 0: the rest weigh ~4 e^-71.
  const Shape s{.batch = 2, .context = 5, .heads = 4, .kv_heads = 2, .head_dim = 2};
  std::vector<double> q(s.q_count(), 0.0), k(s.kv_count(), 0.0), v(s.kv_count(), 0.0);
  const auto dominant = [](int b, int kvh) { return (3 * b + 2 * kvh + 1) % 5; };
  for (int b = 0; b < s.batch; ++b) {
    for (int kvh = 0; kvh < s.kv_heads; ++kvh) {
      for (int t = 0; t < s.context; ++t) {
        for (int d = 0; d < s.head_dim; ++d) {
          v[s.kv_index(b, kvh, t, d)] = 100.0 * b + 10.0 * kvh + t + 0.5 * d;
        }
      }
      k[s.kv_index(b, kvh, dominant(b, kvh), 0)] = 1.0;
    }
    for (int h = 0; h < s.heads; ++h) q[(static_cast<std::size_t>(b) * s.heads + h) * s.head_dim] = 100.0;
  }
  const auto out = decode_attention(s, q, k, v);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / 2;
      for (int d = 0; d < s.head_dim; ++d) {
        EXPECT_NEAR(out[(static_cast<std::size_t>(b) * s.heads + h) * s.head_dim + d],
                    100.0 * b + 10.0 * kvh + dominant(b, kvh) + 0.5 * d, 1e-12)
            << b << " " << h << " " << d;
      }
    }
  }
}

TEST(Ch19KvQuantReference, EqualScoresAverageTheValues) {
  // q = 0: the output is the plain mean of V over the context, here of the dequantized V, whose values
  // (multiples of 0.5 up to 3.5 at scale 3.5 / 448) are exact in e4m3 times the scale.
  const Shape s{.batch = 1, .context = 8, .heads = 2, .kv_heads = 1, .head_dim = 1};
  std::vector<float> vsrc(8);
  for (int t = 0; t < 8; ++t) vsrc[t] = 0.5f * static_cast<float>(t);
  const QuantizedCache vq = quantize_cache(s, vsrc);
  const auto v = dequantize_cache(s, vq.codes, vq.scales);
  for (int t = 0; t < 8; ++t) EXPECT_NEAR(v[t], vsrc[t], 1e-6) << t;
  const std::vector<double> q(s.q_count(), 0.0), k(s.kv_count(), 0.3);
  const auto out = decode_attention(s, q, k, v);
  EXPECT_NEAR(out[0], 1.75, 1e-6);
  EXPECT_NEAR(out[1], 1.75, 1e-6);
}

TEST(Ch19KvQuantReference, RelativeErrorIsAgainstTheRmsOfTheBase) {
  // base rms = sqrt((9 + 16) / 2) = sqrt(12.5); differences 0.5 and 0: max 0.5, rms 0.5 / sqrt(2).
  const std::vector<float> base = {3.0f, -4.0f}, got = {3.5f, -4.0f};
  const RelativeError e = relative_error(got, base);
  EXPECT_NEAR(e.max, 0.5 / std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(e.rms, 0.5 / std::sqrt(2.0) / std::sqrt(12.5), 1e-12);
  const RelativeError same = relative_error(base, base);
  EXPECT_EQ(same.max, 0.0);
  EXPECT_EQ(same.rms, 0.0);
}

}  // namespace
}  // namespace aisp::ch19::kv_quant
