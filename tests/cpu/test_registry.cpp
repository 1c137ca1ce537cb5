#include <gtest/gtest.h>

#include "core/base/error.hpp"
#include "core/base/registry.hpp"

namespace {

using namespace aisp;

std::vector<TargetInfo> catalogue() {
  TargetInfo copy{.chapter = "ch07", .ladder = "copy", .summary = "copy"};
  copy.variants = {
      {.step = 1, .slug = "chunked", .kind = VariantKind::baseline, .summary = "a"},
      {.step = 2, .slug = "coalesced", .kind = VariantKind::step, .summary = "b"},
      {.step = 0, .slug = "memcpy", .kind = VariantKind::vendor, .summary = "c"},
  };
  TargetInfo transpose{.chapter = "ch07", .ladder = "transpose", .summary = "t"};
  transpose.variants = {{.step = 1, .slug = "naive", .kind = VariantKind::baseline, .summary = "n"}};
  TargetInfo sgemm{.chapter = "ch09", .ladder = "sgemm", .summary = "s"};
  sgemm.variants = {{.step = 1, .slug = "naive", .kind = VariantKind::baseline, .summary = "n"}};
  TargetInfo hidden{.chapter = "selftest", .ladder = "copy", .summary = "h", .hidden = true};
  hidden.variants = {{.step = 1, .slug = "honest", .kind = VariantKind::baseline, .summary = "h"}};
  return {copy, transpose, sgemm, hidden};
}

std::vector<std::string> names(const Selection& s) {
  std::vector<std::string> out;
  for (const auto& item : s.items) {
    for (const auto* v : item.variants) out.push_back(item.target->variant_name(*v));
  }
  return out;
}

TEST(VariantInfo, FileStem) {
  EXPECT_EQ((VariantInfo{.step = 3, .slug = "vectorized"}.file_stem()), "03_vectorized");
  EXPECT_EQ((VariantInfo{.step = 12, .slug = "x"}.file_stem()), "12_x");
  EXPECT_EQ((VariantInfo{.slug = "cublas", .kind = VariantKind::vendor}.file_stem()), "vendor_cublas");
}

TEST(Select, EmptyMeansEveryVisibleTarget) {
  const auto cat = catalogue();
  const auto s = select(cat, {});
  ASSERT_EQ(s.items.size(), 3u);
  EXPECT_EQ(names(s).size(), 5u);
}

TEST(Select, ChapterTargetAndVariant) {
  const auto cat = catalogue();
  EXPECT_EQ(names(select(cat, {"ch07"})).size(), 4u);
  EXPECT_EQ(names(select(cat, {"ch07:copy"})),
            (std::vector<std::string>{"ch07:copy:01_chunked", "ch07:copy:02_coalesced", "ch07:copy:vendor_memcpy"}));
  EXPECT_EQ(names(select(cat, {"ch07:copy:vendor_memcpy"})), (std::vector<std::string>{"ch07:copy:vendor_memcpy"}));
}

TEST(Select, CommaListsRepeatsAndDuplicatesKeepLadderOrder) {
  const auto cat = catalogue();
  const auto s = select(cat, {"ch07:copy:vendor_memcpy, ch07:copy:01_chunked", "ch07:copy:01_chunked", "ch09"});
  EXPECT_EQ(names(s), (std::vector<std::string>{"ch07:copy:01_chunked", "ch07:copy:vendor_memcpy",
                                                "ch09:sgemm:01_naive"}));
}

TEST(Select, UnknownSelectorNamesCloseMatches) {
  const auto cat = catalogue();
  try {
    select(cat, {"ch07:copyy"});
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown target selector 'ch07:copyy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ch07:copy"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_THROW(select(cat, {"ch99"}), UsageError);
  EXPECT_THROW(select(cat, {"ch07:copy:05_missing"}), UsageError);
}

TEST(Select, HiddenTargetsNeedIncludeHidden) {
  const auto cat = catalogue();
  EXPECT_THROW(select(cat, {"selftest:copy"}), UsageError);
  EXPECT_EQ(names(select(cat, {"selftest:copy"}, true)), (std::vector<std::string>{"selftest:copy:01_honest"}));
  EXPECT_EQ(select(cat, {}, true).items.size(), 4u);
}

TEST(CloseMatches, RanksByEditDistance) {
  const std::vector<std::string> c{"ch07:copy", "ch07:transpose", "ch09:sgemm"};
  const auto m = close_matches("ch07:cpy", c, 1);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], "ch07:copy");
  EXPECT_TRUE(close_matches("zzzzzzzzzzzzzzzzzzzzzzzz", c).empty());
}

}  // namespace
