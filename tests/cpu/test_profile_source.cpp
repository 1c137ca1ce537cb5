// `aisp profile --source`: the Source page's export command, and its summary read from a captured export
// (tests/cpu/fixtures/ncu/ch19_weight_only_gemv_05.full.source.csv) and from hand-written ones: the stall
// reasons over all instructions, the hottest instructions with their own reasons, the instruction mix, a
// launch of several kernels, and one-line errors for what is not a Source page.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/profile/profile.hpp"
#include "core/profile/source_page.hpp"

namespace {

using namespace aisp;
using namespace aisp::profile;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(AISP_TEST_DATA_DIR) + "/fixtures/ncu/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SourcePage, ExportCommandAsksForTheSassSourcePage) {
  const auto argv = source_export_command("/opt/ncu", "/tmp/a b/x.ncu-rep");
  const std::vector<std::string> expected{"/opt/ncu", "--import", "/tmp/a b/x.ncu-rep", "--csv",
                                          "--page",   "source",   "--print-source",    "sass"};
  EXPECT_EQ(argv, expected);
}

TEST(SourcePage, CapturedExportOfTheTensorCoreGemv) {
  const SourceSummary s = summarize_source_page(fixture("ch19_weight_only_gemv_05.full.source.csv"), 5);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_NE(s.kernels[0].find("tensor_core_kernel"), std::string::npos);
  EXPECT_EQ(s.instructions, 52u);
  EXPECT_DOUBLE_EQ(s.samples, 621.0);
  EXPECT_DOUBLE_EQ(s.executed, 327296.0);
  // The hottest instruction: the first use of x in the prologue, all of its samples long scoreboard.
  ASSERT_EQ(s.hottest.size(), 5u);
  EXPECT_EQ(s.hottest[0].address, "0x7f91b97ab840");
  EXPECT_EQ(s.hottest[0].sass, "PRMT R11, R5, 0x7632, R7");
  EXPECT_DOUBLE_EQ(s.hottest[0].samples, 259.0);
  ASSERT_FALSE(s.hottest[0].reasons.empty());
  EXPECT_EQ(s.hottest[0].reasons[0].first, "long_sb");
  EXPECT_DOUBLE_EQ(s.hottest[0].reasons[0].second, 259.0);
  for (std::size_t i = 1; i < s.hottest.size(); ++i) EXPECT_GE(s.hottest[i - 1].samples, s.hottest[i].samples);
  // Reasons are summed over every instruction, largest first, and add up to the samples.
  ASSERT_FALSE(s.reasons.empty());
  EXPECT_EQ(s.reasons[0].first, "long_sb");
  double sum = 0;
  for (const auto& [reason, v] : s.reasons) {
    EXPECT_EQ(reason.rfind("stall_", 0), std::string::npos) << "the prefix is dropped";
    EXPECT_EQ(reason.find("Not Issued"), std::string::npos) << "the not-issued columns are not reasons";
    sum += v;
  }
  EXPECT_DOUBLE_EQ(sum, s.samples);
  // The mix: opcodes with their modifiers, predicate guards dropped, largest first, at most `top`.
  ASSERT_EQ(s.mix.size(), 5u);
  for (std::size_t i = 1; i < s.mix.size(); ++i) EXPECT_GE(s.mix[i - 1].second, s.mix[i].second);
  for (const auto& [op, v] : s.mix) EXPECT_NE(op[0], '@') << op;
}

TEST(SourcePage, KernelsOfOneLaunchAddUpAndChatterIsSkipped) {
  const std::string csv =
      "==PROF== Connected to process 1\n"
      "\"Kernel Name\",\"first\",\n"
      "\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"Instructions Executed\","
      "\"stall_wait\",\"stall_math\",\"stall_wait (Not Issued)\"\n"
      "\"0x10\",\"  @!P0 BRA 0x40\",\"4\",\"10\",\"3\",\"1\",\"3\"\n"
      "\"0x20\",\"  IMAD.MOV.U32 R1, RZ, RZ, R2\",\"0\",\"1,000\",\"0\",\"0\",\"0\"\n"
      "\"Kernel Name\",\"second\",\n"
      "\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"Instructions Executed\","
      "\"stall_wait\",\"stall_math\",\"stall_wait (Not Issued)\"\n"
      "\"0x10\",\"HMMA.16816.F32.BF16 R4, R8, R12, R4\",\"6\",\"20\",\"0\",\"6\",\"0\"\n";
  const SourceSummary s = summarize_source_page(csv, 10);
  ASSERT_EQ(s.kernels, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(s.instructions, 3u);
  EXPECT_DOUBLE_EQ(s.samples, 10.0);
  EXPECT_DOUBLE_EQ(s.executed, 1030.0);  // thousands separators read
  ASSERT_EQ(s.reasons.size(), 2u);
  EXPECT_EQ(s.reasons[0], (std::pair<std::string, double>{"math", 7.0}));
  EXPECT_EQ(s.reasons[1], (std::pair<std::string, double>{"wait", 3.0}));
  ASSERT_EQ(s.hottest.size(), 2u) << "instructions without samples are not 'hot'";
  EXPECT_EQ(s.hottest[0].kernel, "second");
  EXPECT_EQ(s.hottest[1].sass, "@!P0 BRA 0x40");
  ASSERT_EQ(s.mix.size(), 3u);
  EXPECT_EQ(s.mix[0].first, "IMAD.MOV.U32");
  EXPECT_EQ(s.mix[2].first, "BRA") << "the predicate guard is not part of the opcode";

  const std::string text = render_source_summary(s, "ch00:demo:01_x");
  EXPECT_NE(text.find("ch00:demo:01_x: 10 stall samples over 3 SASS instructions (2 kernels)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("math 70.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("HMMA.16816.F32.BF16 R4, R8, R12, R4"), std::string::npos) << text;

  const auto j = to_json(s);
  EXPECT_EQ(j["samples"], 10.0);
  EXPECT_EQ(j["hottest"][0]["reasons"]["math"], 6.0);
  EXPECT_EQ(j["mix"][0]["opcode"], "IMAD.MOV.U32");
}

TEST(SourcePage, WhatIsNotASourcePageIsOneLineDataError) {
  const auto one_line = [](const std::string& csv) {
    try {
      summarize_source_page(csv, 5);
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      return what;
    }
    ADD_FAILURE() << "no DataError for: " << csv;
    return std::string();
  };
  EXPECT_NE(one_line("").find("no \"Kernel Name\""), std::string::npos);
  EXPECT_NE(one_line("\"ID\",\"Kernel Name\"\n\"1\",\"k\"\n").find("no \"Kernel Name\""), std::string::npos);
  EXPECT_NE(one_line("\"Kernel Name\",\"k\"\n").find("without its header"), std::string::npos);
  EXPECT_NE(one_line("\"Kernel Name\",\"k\"\n\"ID\",\"x\"\n").find("\"Address\""), std::string::npos);
  // A report captured without SourceCounters: the columns are missing, and the message says what to do.
  EXPECT_NE(one_line("\"Kernel Name\",\"k\"\n\"Address\",\"Source\"\n").find("--set full"), std::string::npos);
}

}  // namespace
