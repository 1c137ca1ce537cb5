// CPU tests of ch07:gather's host reference: the index distribution and the gather on hand-checkable data.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "chapters/ch07_memory_access/gather/reference.hpp"

namespace aisp::ch07::gather {
namespace {

TEST(GatherReference, CopiesTheIndexedRowsInLookupOrder) {
  // Three rows of two columns; lookups 2, 0, 2.
  const std::vector<double> table = {10, 11, 20, 21, 30, 31};
  const std::vector<double> idx = {2, 0, 2};
  const std::vector<double> want = {30, 31, 10, 11, 30, 31};
  EXPECT_EQ(gather_rows(table, idx, 2), want);
}

TEST(GatherReference, RowMapIsABijectionForEverySeed) {
  for (std::int64_t vocab : {1, 7, 1000, 4096}) {
    for (std::uint64_t seed : {1ull, 2ull, 99ull}) {
      const RowMap map(seed, vocab);
      std::set<std::int64_t> rows;
      for (std::int64_t r = 0; r < vocab; ++r) {
        const auto row = map(r);
        ASSERT_GE(row, 0);
        ASSERT_LT(row, vocab);
        rows.insert(row);
      }
      EXPECT_EQ(static_cast<std::int64_t>(rows.size()), vocab) << "vocab " << vocab << " seed " << seed;
    }
  }
}

TEST(GatherReference, IndicesAreSkewedInRangeAndMoveWithTheSeed) {
  const std::int64_t vocab = 131072, lookups = 32768;
  const auto a = make_indices(lookups, vocab, 1);
  const auto b = make_indices(lookups, vocab, 2);
  EXPECT_NE(a, b);
  for (auto i : a) {
    ASSERT_GE(i, 0);
    ASSERT_LT(i, vocab);
  }
  // Zipf(1) over 2^17 rows: the top row takes ln 2 / ln(2^17 + 1) ~ 5.9% of the lookups.
  std::vector<std::int64_t> count(vocab, 0);
  for (auto i : a) ++count[i];
  const auto top = *std::max_element(count.begin(), count.end());
  EXPECT_GT(top, lookups * 4 / 100);
  EXPECT_LT(top, lookups * 8 / 100);
  // The distinct rows are the same number for both seeds, and what distinct_rows says.
  const auto distinct = [](std::vector<std::int32_t> v) {
    std::sort(v.begin(), v.end());
    return static_cast<std::int64_t>(std::unique(v.begin(), v.end()) - v.begin());
  };
  EXPECT_EQ(distinct(a), distinct_rows(lookups, vocab));
  EXPECT_EQ(distinct(b), distinct_rows(lookups, vocab));
  EXPECT_LT(distinct(a), lookups / 2);  // many repeats: the lesson of the dedup step
}

}  // namespace
}  // namespace aisp::ch07::gather
