#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/measure/verdict.hpp"

namespace {

using aisp::ExitCode;
using aisp::Verdict;

const std::vector<Verdict> k_all{Verdict::pass,        Verdict::fail,  Verdict::invalid,
                                 Verdict::implausible, Verdict::noisy, Verdict::skipped,
                                 Verdict::error};

TEST(Verdict, NamesRoundTripAndAreDistinct) {
  std::set<std::string_view> names;
  for (Verdict v : k_all) {
    const std::string_view name = aisp::to_string(v);
    EXPECT_EQ(aisp::verdict_from_string(name), v) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), k_all.size());
  EXPECT_EQ(aisp::to_string(Verdict::pass), "PASS");
  EXPECT_EQ(aisp::to_string(Verdict::implausible), "IMPLAUSIBLE");
}

TEST(Verdict, UnknownNamesAreRejected) {
  EXPECT_FALSE(aisp::verdict_from_string("pass").has_value());  // names are upper case on disk
  EXPECT_FALSE(aisp::verdict_from_string("").has_value());
  EXPECT_FALSE(aisp::verdict_from_string("PASSED").has_value());
  EXPECT_FALSE(aisp::verdict_from_string("PASS ").has_value());
}

TEST(Verdict, FailingSet) {
  for (Verdict v : k_all) {
    const bool expected = v == Verdict::fail || v == Verdict::invalid ||
                          v == Verdict::implausible || v == Verdict::error;
    EXPECT_EQ(aisp::is_failing(v), expected) << aisp::to_string(v);
  }
}

TEST(ExitCodeFor, OkOnlyWithoutFailingVerdicts) {
  EXPECT_EQ(aisp::exit_code_for(std::vector<Verdict>{}), ExitCode::ok);
  EXPECT_EQ(
      aisp::exit_code_for(std::vector<Verdict>{Verdict::pass, Verdict::noisy, Verdict::skipped}),
      ExitCode::ok);
  for (Verdict bad : {Verdict::fail, Verdict::invalid, Verdict::implausible, Verdict::error}) {
    const std::vector<Verdict> run{Verdict::pass, Verdict::noisy, bad, Verdict::skipped};
    EXPECT_EQ(aisp::exit_code_for(run), ExitCode::verdict_failure) << aisp::to_string(bad);
  }
}

TEST(ExitCodeFor, NumericValuesAreStable) {
  // Scripts depend on these numbers; the help text must list each one.
  EXPECT_EQ(static_cast<int>(ExitCode::ok), 0);
  EXPECT_EQ(static_cast<int>(ExitCode::verdict_failure), 1);
  EXPECT_EQ(static_cast<int>(ExitCode::usage), 2);
  EXPECT_EQ(static_cast<int>(ExitCode::no_cuda_device), 3);
  EXPECT_EQ(static_cast<int>(ExitCode::regression), 4);
  EXPECT_EQ(static_cast<int>(ExitCode::machine_drift), 5);
  EXPECT_EQ(static_cast<int>(ExitCode::internal), 70);
  const std::string help(aisp::exit_code_help());
  for (const char* code : {"  0 ", "  1 ", "  2 ", "  3 ", "  4 ", "  5 ", "  70 "}) {
    EXPECT_NE(help.find(code), std::string::npos) << code;
  }
}

}  // namespace
