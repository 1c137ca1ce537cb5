// The physics check end to end: `bench run` loads (or measures) the ceilings, places every PASS variant,
// and makes a variant whose declared bytes are inflated tenfold IMPLAUSIBLE, with the numbers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/results/results.hpp"
#include "device/orchestrator.hpp"

namespace {

using namespace aisp;
namespace fs = std::filesystem;

RunOutcome run_physics(std::int64_t inflate, const fs::path& out) {
  RunOptions o;
  o.selectors = {"selftest:physics"};
  o.axis_overrides = {{"inflate", inflate}};
  o.include_hidden = true;
  o.rule.min_samples = 6;
  o.rule.min_time_s = 0.005;
  o.rule.max_time_s = 0.3;
  o.out_root = out.string();
  std::ostringstream progress;
  RunOutcome r = run_benchmarks(o, progress);
  GTEST_LOG_(INFO) << progress.str();
  return r;
}

TEST(Physics, InflatedBytesAreImplausibleHonestOnesArePlaced) {
  const fs::path out = fs::temp_directory_path() / ("aisp_gpu_test_physics_" + std::to_string(getpid()));
  fs::remove_all(out);

  const RunOutcome honest = run_physics(1, out);
  ASSERT_TRUE(honest.results.ceilings);
  ASSERT_TRUE(honest.results.ceilings->problem.empty()) << honest.results.ceilings->problem;
  EXPECT_TRUE(honest.results.ceilings->set.value("dram_copy"));
  const auto& h = honest.results.targets.at(0).variants.at(0);
  ASSERT_EQ(h.verdict, Verdict::pass) << h.reason;
  ASSERT_TRUE(h.roofline);
  EXPECT_EQ(h.roofline->ceiling, "dram_copy");
  EXPECT_EQ(h.roofline->physics, "ok");
  EXPECT_GT(h.roofline->percent, 10);
  EXPECT_LT(h.roofline->percent, 103);

  const RunOutcome inflated = run_physics(10, out);
  const auto& v = inflated.results.targets.at(0).variants.at(0);
  EXPECT_EQ(v.verdict, Verdict::implausible) << v.reason;
  EXPECT_NE(v.reason.find("physics floor"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("GB/s"), std::string::npos) << v.reason;
  ASSERT_TRUE(v.roofline);
  EXPECT_GT(v.roofline->percent, 300);

  // The stored results carry the verdict and the ceilings used.
  std::ifstream in(fs::path(inflated.run_dir) / "results.json");
  const auto reread = run_results_from_json(nlohmann::json::parse(in));
  EXPECT_EQ(reread.targets.at(0).variants.at(0).verdict, Verdict::implausible);
  ASSERT_TRUE(reread.ceilings);
  EXPECT_FALSE(reread.ceilings->source.empty());
  fs::remove_all(out);
}

}  // namespace
