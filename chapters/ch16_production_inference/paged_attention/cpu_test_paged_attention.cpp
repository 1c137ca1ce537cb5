// ch16:paged_attention — the host reference, the page table and the split plan on cases small enough to
// check by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "chapters/ch16_production_inference/paged_attention/reference.hpp"
#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"

namespace aisp::ch16::paged_attention {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// Inputs of one shape: zeros, and NaN in every slot past the context (as the device inputs have).
struct Inputs {
  Shape s;
  std::vector<double> q, k, v, table;

  Inputs(const Shape& shape, std::vector<std::int32_t> pages) : s(shape) {
    q.assign(s.q_count(), 0.0);
    k.assign(s.kv_count(), k_nan);
    v.assign(s.kv_count(), k_nan);
    table.assign(pages.begin(), pages.end());
    for (int b = 0; b < s.batch; ++b) {
      for (int t = 0; t < s.context; ++t) {
        for (int kvh = 0; kvh < s.kv_heads; ++kvh) {
          for (int d = 0; d < s.head_dim; ++d) k[at(b, kvh, t, d)] = v[at(b, kvh, t, d)] = 0.0;
        }
      }
    }
  }
  // Where token t of sequence b lives, found through the page table.
  std::size_t at(int b, int kvh, int t, int d) const {
    const auto logical = static_cast<std::size_t>(b) * s.pages_per_seq() + t / s.page_size;
    const auto page = static_cast<std::int64_t>(table[logical]);
    return s.kv_index(page, kvh, t % s.page_size, d);
  }
  double& q_at(int b, int h, int d) { return q[(static_cast<std::size_t>(b) * s.heads + h) * s.head_dim + d]; }
  std::vector<double> run() const { return decode_attention(s, q, k, v, table); }
};

double out_at(const Shape& s, const std::vector<double>& out, int b, int h, int d) {
  return out[(static_cast<std::size_t>(b) * s.heads + h) * s.head_dim + d];
}

TEST(Ch16PagedAttentionReference, TwoTokensSplitByTheirExponentials) {
  // One sequence of two one-token pages, stored swapped: token 0 in page 1, token 1 in page 0. Scores
  // 0 and ln 3 (head_dim 1: scale 1) weigh the tokens 1/4 and 3/4.
  Inputs in({.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = 1, .page_size = 1, .context = 2}, {1, 0});
  in.q_at(0, 0, 0) = std::log(3.0);
  in.k[in.s.kv_index(1, 0, 0, 0)] = 0.0;
  in.k[in.s.kv_index(0, 0, 0, 0)] = 1.0;
  in.v[in.s.kv_index(1, 0, 0, 0)] = 10.0;
  in.v[in.s.kv_index(0, 0, 0, 0)] = 20.0;
  EXPECT_NEAR(in.run()[0], 0.25 * 10.0 + 0.75 * 20.0, 1e-12);
}

TEST(Ch16PagedAttentionReference, EqualScoresAverageTheValuesOfTheContextOnly) {
  // q = 0: every score is 0, the output is the plain mean of V over the 7 tokens. The context ends in the
  // middle of each sequence's second page; the slots after it hold NaN and must not be read.
  const Shape s{.batch = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .page_size = 4, .context = 7};
  Inputs in(s, make_page_table(s.batch, s.pages_per_seq(), 7));
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.context; ++t) {
      for (int d = 0; d < s.head_dim; ++d) {
        in.k[in.at(b, 0, t, d)] = 0.5 * t - d;  // ignored: q = 0
        in.v[in.at(b, 0, t, d)] = 100.0 * b + t + 0.01 * d;
      }
    }
  }
  const auto out = in.run();
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int d = 0; d < s.head_dim; ++d) {
        EXPECT_NEAR(out_at(s, out, b, h, d), 100.0 * b + 3.0 + 0.01 * d, 1e-12) << b << " " << h << " " << d;
      }
    }
  }
}

TEST(Ch16PagedAttentionReference, ADominantKeySelectsItsValueRow) {
  // Token 9 (the second page, 3 pages of 4 for 10 tokens) has k = e0 and q = 100 e0: score 100 * 0.5 = 50
  // against 0 for the others, whose total weight is 9 e^-50 ~ 2e-21.
  const Shape s{.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = 4, .page_size = 4, .context = 10};
  Inputs in(s, make_page_table(s.batch, s.pages_per_seq(), 3));
  for (int t = 0; t < s.context; ++t) {
    for (int d = 0; d < s.head_dim; ++d) in.v[in.at(0, 0, t, d)] = 10.0 * t + d;
  }
  in.k[in.at(0, 0, 9, 0)] = 1.0;
  in.q_at(0, 0, 0) = 100.0;
  const auto out = in.run();
  for (int d = 0; d < s.head_dim; ++d) EXPECT_NEAR(out[d], 90.0 + d, 1e-12);
}

TEST(Ch16PagedAttentionReference, QueryHeadsReadTheirGroupsKvHead) {
  // 4 query heads over 2 KV heads: heads 0 and 1 read KV head 0, heads 2 and 3 KV head 1. Each KV head has
  // a different dominant token (3 for head 0, 1 for head 1) and different values, so both the K and the V
  // mapping show in the output.
  const Shape s{.batch = 2, .heads = 4, .kv_heads = 2, .head_dim = 2, .page_size = 2, .context = 5};
  Inputs in(s, make_page_table(s.batch, s.pages_per_seq(), 11));
  const int dominant[2] = {3, 1};
  for (int b = 0; b < s.batch; ++b) {
    for (int kvh = 0; kvh < s.kv_heads; ++kvh) {
      for (int t = 0; t < s.context; ++t) {
        for (int d = 0; d < s.head_dim; ++d) in.v[in.at(b, kvh, t, d)] = 100.0 * b + 10.0 * kvh + t + 0.5 * d;
      }
      in.k[in.at(b, kvh, dominant[kvh], 0)] = 1.0;
    }
    for (int h = 0; h < s.heads; ++h) in.q_at(b, h, 0) = 100.0;  // score 100 / sqrt(2) for the dominant token
  }
  const auto out = in.run();
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / 2;
      for (int d = 0; d < s.head_dim; ++d) {
        EXPECT_NEAR(out_at(s, out, b, h, d), 100.0 * b + 10.0 * kvh + dominant[kvh] + 0.5 * d, 1e-12)
            << b << " " << h << " " << d;
      }
    }
  }
}

TEST(Ch16PagedAttentionReference, PageTableIsASeededPermutationOfAllPages) {
  const auto a = make_page_table(64, 512, 1);
  const auto b = make_page_table(64, 512, 2);
  EXPECT_EQ(a, make_page_table(64, 512, 1));
  EXPECT_NE(a, b);
  std::vector<std::int32_t> identity(a.size());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(a, identity);
  for (auto t : {a, b}) {
    std::sort(t.begin(), t.end());
    EXPECT_EQ(t, identity);
  }
}

TEST(Ch16PagedAttentionReference, SplitPlanUsesTheWavesWithNonEmptySplits) {
  // The ladder's test size (3 x 6 pairs, 13 pages) on a GPU holding 528 blocks: as many splits as 4-page
  // splits allow, 4 + 4 + 4 + 1 pages, and still far from a wave.
  EXPECT_EQ(plan_splits(18, 13, 528, 4).splits, 4);
  EXPECT_EQ(plan_splits(18, 13, 528, 4).pages_per_split, 4);
  // 2048 blocks on 1056 slots: 1.94 waves, 97% used: no split.
  EXPECT_EQ(plan_splits(64 * 32, 512, 1056, 4).splits, 1);
  // 512 blocks on 396 slots: 1 split uses 65% of 2 waves, 2 splits 86% of 3, 3 splits 97% of 4.
  EXPECT_EQ(plan_splits(512, 512, 396, 4).splits, 3);
  EXPECT_EQ(plan_splits(512, 512, 396, 4).pages_per_split, 171);
  // One sequence of 32 heads on 792 slots: 22 splits (of 24 pages) fill 89% of a wave, 23 (of 23) 93%.
  EXPECT_EQ(plan_splits(32, 512, 792, 4).splits, 23);
  for (int items : {1, 3, 32, 512, 4096}) {
    for (int pages : {1, 5, 13, 512, 4097}) {
      for (int resident : {132, 528, 2112}) {
        const SplitPlan p = plan_splits(items, pages, resident, 4);
        ASSERT_GE(p.splits, 1);
        EXPECT_GE(p.pages_per_split, std::min(4, pages));
        EXPECT_LT(static_cast<long>(p.splits - 1) * p.pages_per_split, pages) << "an empty split";
        EXPECT_GE(static_cast<long>(p.splits) * p.pages_per_split, pages) << "pages left out";
      }
    }
  }
}

}  // namespace
}  // namespace aisp::ch16::paged_attention
