// The cheat suite (docs/trust.md): every cheating variant of cheats:scale ends in its stated verdict, and
// the honest ones (one stream, two streams joined) PASS with no false alarm.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include <filesystem>
#include <map>
#include <sstream>

#include "device/orchestrator.hpp"

namespace {

using namespace aisp;
namespace fs = std::filesystem;

TEST(Cheats, EveryCheatIsCaughtAndHonestVariantsPass) {
  const fs::path out = fs::temp_directory_path() / ("aisp_cheats_" + std::to_string(getpid()));
  RunOptions o;
  o.selectors = {"cheats:scale"};
  o.include_hidden = true;
  o.axis_overrides = {{"n", 1 << 20}};
  o.rule.min_samples = 6;
  o.rule.min_time_s = 0.005;
  o.rule.max_time_s = 0.2;
  o.timeout_s = 60;
  o.out_root = out.string();
  std::ostringstream progress;
  const auto outcome = run_benchmarks(o, progress);
  ASSERT_EQ(outcome.results.targets.size(), 1u);
  std::map<std::string, VariantResult> by;
  for (const auto& v : outcome.results.targets[0].variants) by[v.slug] = v;
  int devices = 0;
  cudaGetDeviceCount(&devices);

  const std::map<std::string, std::vector<Verdict>> expected{
      {"honest", {Verdict::pass}},
      {"own_stream", {Verdict::invalid}},
      {"half_output", {Verdict::fail}},
      {"precomputed", {Verdict::fail}},
      {"cached", {Verdict::fail}},
      {"in_place", {Verdict::fail}},
      {"host_callback", {Verdict::invalid}},
      {"other_gpu", {devices > 1 ? Verdict::invalid : Verdict::skipped}},
      {"bf16", {Verdict::fail}},
      {"tenth", {Verdict::fail, Verdict::implausible}},
      {"two_streams", {Verdict::pass}},
  };
  ASSERT_EQ(by.size(), expected.size());
  for (const auto& [slug, allowed] : expected) {
    const auto& v = by.at(slug);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), v.verdict), allowed.end())
        << slug << " ended " << to_string(v.verdict) << ": " << v.reason;
    std::printf("  %-14s %-8s %s\n", slug.c_str(), std::string(to_string(v.verdict)).c_str(), v.reason.c_str());
  }
  // Each FAIL must be the check that catches that cheat, not an accident.
  EXPECT_EQ(by.at("precomputed").validation->failed_check, "mismatch");
  EXPECT_EQ(by.at("precomputed").validation->seeds.size(), 2u) << "caught by the second seed";
  EXPECT_EQ(by.at("in_place").validation->failed_check, "input_modified");
  EXPECT_EQ(by.at("half_output").validation->first_mismatches.front().index, (std::size_t{1} << 20) / 2);
  EXPECT_NE(by.at("own_stream").reason.find("not ordered on the harness stream"), std::string::npos)
      << by.at("own_stream").reason;
  EXPECT_NE(by.at("own_stream").reason.find("scale_kernel"), std::string::npos) << "names the kernel";
  fs::remove_all(out);
}

}  // namespace
