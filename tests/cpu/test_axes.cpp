#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/base/axes.hpp"
#include "core/base/error.hpp"

namespace {

using aisp::parse_axis_value;
using aisp::UsageError;

// The message of the UsageError that `fn` throws; fails the test when it throws nothing or another
// type.
template <typename Fn>
std::string usage_message(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected UsageError";
  return {};
}

TEST(ParseAxisValue, AcceptedForms) {
  EXPECT_EQ(parse_axis_value("268435456"), 268435456);
  EXPECT_EQ(parse_axis_value("0"), 0);
  EXPECT_EQ(parse_axis_value("0x1000"), 4096);
  EXPECT_EQ(parse_axis_value("0XfF"), 255);
  EXPECT_EQ(parse_axis_value("1<<28"), std::int64_t{1} << 28);
  EXPECT_EQ(parse_axis_value("2^28"), std::int64_t{1} << 28);
  EXPECT_EQ(parse_axis_value("10^3"), 1000);
  EXPECT_EQ(parse_axis_value("7^0"), 1);
  EXPECT_EQ(parse_axis_value("3*1024"), 3072);
  EXPECT_EQ(parse_axis_value("2*3*4"), 24);
  EXPECT_EQ(parse_axis_value("256Ki"), 256 * 1024);
  EXPECT_EQ(parse_axis_value("64Mi"), std::int64_t{64} << 20);
  EXPECT_EQ(parse_axis_value("4Gi"), std::int64_t{4} << 30);
  EXPECT_EQ(parse_axis_value("3Gi"), std::int64_t{3} << 30);
  EXPECT_EQ(parse_axis_value("16*1Mi"), std::int64_t{16} << 20);
  EXPECT_EQ(parse_axis_value("1Ki<<2"), 4096);
  EXPECT_EQ(parse_axis_value("0x10*2^4"), 256);  // '^' binds tighter than '*'
  EXPECT_EQ(parse_axis_value("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parse_axis_value("1<<62"), std::int64_t{1} << 62);
}

TEST(ParseAxisValue, RejectsMalformedTextAndNamesIt) {
  for (const char* bad :
       {"",   "abc", "-5",    "1.5",     "1e6", " 5",  "5 ",   "0x",    "2^",    "<<3",  "1<<",
        "3*", "*3",  "2^3^2", "1<<2<<3", "4K",  "4ki", "4KiB", "2^1Ki", "1_000", "12abc"}) {
    const std::string msg = usage_message([&] { parse_axis_value(bad); });
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(ParseAxisValue, RejectsOverflow) {
  for (const char* big : {"9223372036854775808", "99999999999999999999", "1<<63", "2^63", "3<<62",
                          "8Gi*2^40", "0x8000000000000000", "10^19", "9223372036854775807*2"}) {
    const std::string msg = usage_message([&] { parse_axis_value(big); });
    EXPECT_NE(msg.find(big), std::string::npos) << msg;
  }
  // Zero never overflows, however large the shift or power.
  EXPECT_EQ(parse_axis_value("0<<100"), 0);
  EXPECT_EQ(parse_axis_value("1^9223372036854775807"), 1);
}

TEST(ParseAxisAssignment, SplitsAtFirstEquals) {
  const auto [name, value] = aisp::parse_axis_assignment("n=1<<20");
  EXPECT_EQ(name, "n");
  EXPECT_EQ(value, 1 << 20);
  EXPECT_EQ(aisp::parse_axis_assignment("block_size=256").first, "block_size");
}

TEST(ParseAxisAssignment, Errors) {
  EXPECT_NE(usage_message([] { aisp::parse_axis_assignment("n1024"); }).find("'n1024'"),
            std::string::npos);
  EXPECT_NE(usage_message([] { aisp::parse_axis_assignment("=5"); }).find("'=5'"),
            std::string::npos);
  EXPECT_NE(usage_message([] { aisp::parse_axis_assignment("n=lots"); }).find("'lots'"),
            std::string::npos);
  EXPECT_THROW(aisp::parse_axis_assignment("n="), UsageError);
  EXPECT_THROW(aisp::parse_axis_assignment("n=1=2"), UsageError);
}

const std::vector<aisp::AxisSpec> k_specs{
    {"n", std::int64_t{1} << 28, "elements", 1},
    {"iters", 10, "repetitions inside one launch", 0},
};

TEST(ResolveAxes, DefaultsAndOverrides) {
  const aisp::AxisValues defaults = aisp::resolve_axes(k_specs, {}, "copy");
  ASSERT_EQ(defaults.size(), 2u);
  EXPECT_EQ(defaults.at("n"), std::int64_t{1} << 28);
  EXPECT_EQ(defaults.at("iters"), 10);

  const aisp::AxisValues set =
      aisp::resolve_axes(k_specs, {{"n", 4096}, {"iters", 0}, {"n", 8192}}, "copy");
  EXPECT_EQ(set.at("n"), 8192);   // the last override of an axis wins
  EXPECT_EQ(set.at("iters"), 0);  // the minimum itself is allowed
}

// The serving ladders' model axis: 0 is the tiny model, the value their correctness tests ask for. A test
// value of 0 must be taken as 0, not as "none" (it once was, and those tests ran the 1B model instead).
TEST(TestAxes, TheTestValueWhenThereIsOneZeroIncludedElseTheDefault) {
  const std::vector<aisp::AxisSpec> specs = {
      {.name = "model", .default_value = 1, .help = "0 = tiny", .min_value = 0, .test_value = 0},
      {.name = "n", .default_value = std::int64_t{1} << 28, .help = "elements", .test_value = 4099},
      {.name = "iters", .default_value = 10, .help = "repeats"}};
  const aisp::AxisValues got = aisp::test_axes(specs);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.at("model"), 0);
  EXPECT_EQ(got.at("n"), 4099);
  EXPECT_EQ(got.at("iters"), 10);
}

TEST(ResolveAxes, UnknownAxisListsTheTargetsAxes) {
  const std::string msg = usage_message([] {
    aisp::resolve_axes(k_specs, {{"m", 5}}, "ch02.copy");
  });
  EXPECT_NE(msg.find("'m'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ch02.copy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n (default"), std::string::npos) << msg;
  EXPECT_NE(msg.find("iters"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  EXPECT_THROW(aisp::resolve_axes({}, {{"n", 5}}, "empty"), UsageError);
}

TEST(ResolveAxes, ValueUnderMinimum) {
  const std::string msg = usage_message([] { aisp::resolve_axes(k_specs, {{"n", 0}}, "copy"); });
  EXPECT_NE(msg.find("'n'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">= 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("iters"), std::string::npos) << msg;
  EXPECT_THROW(aisp::resolve_axes(k_specs, {{"iters", -1}}, "copy"), UsageError);
}

// --- sweeps ---

using aisp::AxisRequest;
using aisp::AxisSpec;
using aisp::AxisValues;
using aisp::expand_axis_points;
using aisp::parse_axis_sweep;

TEST(ParseAxisSweep, OneOrSeveralValuesInAnySyntax) {
  EXPECT_EQ(parse_axis_sweep("n=1024"), (AxisRequest{"n", {1024}}));
  EXPECT_EQ(parse_axis_sweep("n=1Mi,2^24,0x100,3*1Ki"), (AxisRequest{"n", {1 << 20, 1 << 24, 256, 3072}}));
  // Order is kept: it is the order the points run and print in.
  EXPECT_EQ(parse_axis_sweep("block=1024,64"), (AxisRequest{"block", {1024, 64}}));
}

TEST(ParseAxisSweep, Errors) {
  EXPECT_NE(usage_message([] { parse_axis_sweep("n"); }).find("NAME=VALUE"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("=1,2"); }).find("name is empty"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("n="); }).find("empty value"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("n=1,,2"); }).find("empty value"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("n=1,"); }).find("empty value"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("n=1Ki,1024"); }).find("given twice"), std::string::npos);
  EXPECT_NE(usage_message([] { parse_axis_sweep("n=1,x"); }).find("invalid axis value 'x'"), std::string::npos);
}

const std::vector<AxisSpec> k_two_axes{{"m", 8, "rows", 1, 0, {}}, {"n", 16, "columns", 2, 0, {}}};

TEST(ExpandAxisPoints, NoSweepIsTheDefaultsAlone) {
  const auto points = expand_axis_points(k_two_axes, {}, "ch00:t");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0], (AxisValues{{"m", 8}, {"n", 16}}));
  // A target without axes runs once, at no axes.
  EXPECT_EQ(expand_axis_points({}, {}, "ch00:t"), std::vector<AxisValues>{AxisValues{}});
}

TEST(ExpandAxisPoints, CartesianProductLastAxisFastest) {
  const auto points = expand_axis_points(k_two_axes, {{"m", {1, 2}}, {"n", {10, 20, 30}}}, "ch00:t");
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0], (AxisValues{{"m", 1}, {"n", 10}}));
  EXPECT_EQ(points[1], (AxisValues{{"m", 1}, {"n", 20}}));
  EXPECT_EQ(points[2], (AxisValues{{"m", 1}, {"n", 30}}));
  EXPECT_EQ(points[3], (AxisValues{{"m", 2}, {"n", 10}}));
  EXPECT_EQ(points[5], (AxisValues{{"m", 2}, {"n", 30}}));
}

TEST(ExpandAxisPoints, DefaultSweepUnlessTheCliSetsTheAxis) {
  std::vector<AxisSpec> specs = k_two_axes;
  specs[1].default_sweep = {4096, 8192};
  auto points = expand_axis_points(specs, {}, "ch00:t");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].at("n"), 4096);
  EXPECT_EQ(points[1].at("n"), 8192);
  EXPECT_EQ(points[1].at("m"), 8);
  // One value on the CLI picks it; a later request for the same axis wins.
  points = expand_axis_points(specs, {{"n", {100, 200}}, {"n", {300}}}, "ch00:t");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].at("n"), 300);
  // Sweeping the other axis keeps this one's default sweep: a product again.
  EXPECT_EQ(expand_axis_points(specs, {{"m", {1, 2, 3}}}, "ch00:t").size(), 6u);
}

TEST(ExpandAxisPoints, CapUnknownAxesAndMinimums) {
  std::vector<std::int64_t> many;
  for (int i = 1; i <= 9; ++i) many.push_back(i * 2);
  EXPECT_EQ(expand_axis_points(k_two_axes, {{"m", {1, 2, 3, 4, 5, 6, 7, 8}}, {"n", {2, 4, 6, 8, 10, 12, 14, 16}}},
                               "ch00:t").size(),
            64u);  // exactly the cap is fine
  const std::string over = usage_message([&] { expand_axis_points(k_two_axes, {{"m", many}, {"n", many}}, "ch00:t"); });
  EXPECT_NE(over.find("more than 64 axis points (m 9 x n 9)"), std::string::npos) << over;
  EXPECT_EQ(over.find('\n'), std::string::npos);  // one line
  EXPECT_NE(usage_message([&] { expand_axis_points(k_two_axes, {{"k", {1}}}, "ch00:t"); }).find("has no axis 'k'"),
            std::string::npos);
  EXPECT_NE(usage_message([&] { expand_axis_points(k_two_axes, {{"n", {4, 1}}}, "ch00:t"); }).find("must be >= 2"),
            std::string::npos);
  std::vector<AxisSpec> bad = k_two_axes;
  bad[1].default_sweep = {4, 0};
  EXPECT_NE(usage_message([&] { expand_axis_points(bad, {}, "ch00:t"); }).find("under its minimum"), std::string::npos);
}

TEST(FormatAxes, PointsAndDefaults) {
  EXPECT_EQ(aisp::format_axes({{"n", 1024}, {"m", 8}}), "m=8, n=1024");
  EXPECT_EQ(aisp::format_axes({{"n", 1024}, {"m", 8}}, " "), "m=8 n=1024");
  EXPECT_EQ(aisp::format_axes({}), "");
  AxisSpec size{"size", 4096, "matrix size", 1, 0, {4096, 8192}};
  EXPECT_EQ(aisp::format_axis_default(size), "size=4096,8192");
  size.default_sweep.clear();
  EXPECT_EQ(aisp::format_axis_default(size), "size=4096");
}

// An axis added after results were stored (omit_at_default) is left out of what a result records at its
// default, and only there; the other axes are always recorded.
TEST(RecordedAxes, AnOmitAtDefaultAxisIsLeftOutAtItsDefaultOnly) {
  const std::vector<AxisSpec> specs{{.name = "size", .default_value = 8192, .help = "M = N = K"},
                                    {.name = "shape", .default_value = 0, .help = "GEMM shape", .min_value = 0,
                                     .omit_at_default = true}};
  EXPECT_EQ(aisp::recorded_axes(specs, {{"size", 4096}, {"shape", 0}}), (AxisValues{{"size", 4096}}));
  EXPECT_EQ(aisp::recorded_axes(specs, {{"size", 4096}, {"shape", 2}}), (AxisValues{{"size", 4096}, {"shape", 2}}));
  // An axis without the flag stays at its default too.
  EXPECT_EQ(aisp::recorded_axes(specs, {{"size", 8192}, {"shape", 0}}), (AxisValues{{"size", 8192}}));
  // Every point of a sweep over both stays distinct once recorded (absent = the default).
  const auto points = aisp::expand_axis_points(specs, {{"shape", {0, 1, 2, 3}}}, "ch10:hgemm");
  ASSERT_EQ(points.size(), 4u);
  std::vector<AxisValues> recorded;
  for (const auto& p : points) recorded.push_back(aisp::recorded_axes(specs, p));
  for (std::size_t i = 0; i < recorded.size(); ++i)
    for (std::size_t k = 0; k < i; ++k) EXPECT_NE(recorded[i], recorded[k]);
  // The key axes are the others, in spec order.
  EXPECT_EQ(aisp::key_axis_names(specs), std::vector<std::string>{"size"});
  EXPECT_EQ(aisp::key_axis_names(k_two_axes), (std::vector<std::string>{"m", "n"}));
  EXPECT_TRUE(aisp::key_axis_names({}).empty());
}

}  // namespace
