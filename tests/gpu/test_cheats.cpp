// The cheat suite (docs/trust.md): every cheating variant of cheats:scale ends in its stated verdict, and
// the honest ones (one stream, two streams joined) PASS with no false alarm. The cheats of a careful
// adversary (12-16) are also run with the check that catches them turned off: they must then get past
// every other check, which shows that each new check is what catches its cheat.
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

RunOptions cheat_options(std::vector<std::string> selectors) {
  RunOptions o;
  o.selectors = std::move(selectors);
  o.include_hidden = true;
  o.axis_overrides = {{"n", 1 << 22}};
  o.rule.min_samples = 6;
  o.rule.min_time_s = 0.005;
  o.rule.max_time_s = 0.2;
  o.timeout_s = 60;
  o.out_root = (fs::temp_directory_path() / ("aisp_cheats_" + std::to_string(getpid()))).string();
  return o;
}

std::map<std::string, VariantResult> run_cheats(const RunOptions& o) {
  std::ostringstream progress;
  const auto outcome = run_benchmarks(o, progress);
  fs::remove_all(o.out_root);
  std::map<std::string, VariantResult> by;
  if (outcome.results.targets.size() != 1u) {
    ADD_FAILURE() << "expected one target, got " << outcome.results.targets.size();
    return by;
  }
  for (const auto& v : outcome.results.targets[0].variants) by[v.slug] = v;
  return by;
}

void expect_verdicts(const std::map<std::string, VariantResult>& by,
                     const std::map<std::string, std::vector<Verdict>>& expected) {
  ASSERT_EQ(by.size(), expected.size());
  for (const auto& [slug, allowed] : expected) {
    ASSERT_TRUE(by.count(slug)) << slug << " did not run";
    const auto& v = by.at(slug);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), v.verdict), allowed.end())
        << slug << " ended " << to_string(v.verdict) << ": " << v.reason;
    std::printf("  %-17s %-11s %s\n", slug.c_str(), std::string(to_string(v.verdict)).c_str(), v.reason.c_str());
  }
}

bool has_finding(const VariantResult& v, const std::string& part) {
  if (!v.audit) return false;
  return std::any_of(v.audit->findings.begin(), v.audit->findings.end(),
                     [&](const std::string& f) { return f.find(part) != std::string::npos; });
}

TEST(Cheats, EveryCheatIsCaughtAndHonestVariantsPass) {
  const auto by = run_cheats(cheat_options({"cheats:scale"}));
  int devices = 0;
  cudaGetDeviceCount(&devices);
  expect_verdicts(by, {
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
                          {"reference_thief", {Verdict::fail}},
                          {"replay", {Verdict::invalid}},
                          {"known_seeds", {Verdict::fail}},
                          {"late_side_stream", {Verdict::invalid}},
                          {"host_compute", {Verdict::invalid}},
                      });
  if (HasFatalFailure() || by.empty()) return;
  // Each FAIL must be the check that catches that cheat, not an accident.
  EXPECT_EQ(by.at("precomputed").validation->failed_check, "mismatch");
  EXPECT_EQ(by.at("precomputed").validation->seeds.size(), 2u) << "caught by the second seed";
  EXPECT_EQ(by.at("in_place").validation->failed_check, "input_modified");
  EXPECT_EQ(by.at("half_output").validation->first_mismatches.front().index, (std::size_t{1} << 22) / 2);
  EXPECT_NE(by.at("own_stream").reason.find("not ordered on the harness stream"), std::string::npos)
      << by.at("own_stream").reason;
  EXPECT_NE(by.at("own_stream").reason.find("scale_kernel"), std::string::npos) << "names the kernel";
  // The new checks, each named in the verdict's evidence.
  const auto& thief = by.at("reference_thief");
  EXPECT_EQ(thief.validation->failed_check, "mismatch");
  EXPECT_TRUE(thief.validation->reference_masked);
  // What it copied is noise: (nearly) every element wrong; a random pattern lands within tolerance of the
  // right value about once in 10^8 elements.
  EXPECT_GT(thief.validation->mismatches, (std::uint64_t{1} << 22) - 16);
  EXPECT_NE(by.at("replay").reason.find("state kept between launches"), std::string::npos) << by.at("replay").reason;
  ASSERT_TRUE(by.at("replay").validation->fresh_inputs);
  EXPECT_GT(by.at("replay").validation->fresh_inputs->ratio, 1.25);
  EXPECT_EQ(by.at("known_seeds").validation->failed_check, "fresh_inputs");
  EXPECT_NE(by.at("late_side_stream").reason.find("audited at"), std::string::npos) << by.at("late_side_stream").reason;
  EXPECT_EQ(by.at("late_side_stream").reason.find("before validation"), std::string::npos)
      << "must be caught after validation, where it starts to cheat";
  EXPECT_TRUE(has_finding(by.at("host_compute"), "on the host")) << by.at("host_compute").reason;
  // The honest variants went through every new check and passed them.
  for (const char* slug : {"honest", "two_streams"}) {
    const auto& v = by.at(slug);
    ASSERT_TRUE(v.validation->fresh_inputs) << slug;
    EXPECT_LE(v.validation->fresh_inputs->ratio, 1.25) << slug;
    ASSERT_TRUE(v.audit) << slug;
    EXPECT_GE(v.audit->points.size(), 3u) << slug << ": before validation, timed rounds, timed-output launch";
  }
}

TEST(Cheats, EachNewCheatGetsPastEveryOtherCheck) {
  auto o = cheat_options({"cheats:scale:01_honest", "cheats:scale:12_reference_thief", "cheats:scale:13_replay",
                          "cheats:scale:14_known_seeds", "cheats:scale:15_late_side_stream"});
  o.mask_references = false;
  o.fresh_inputs = false;
  o.audit_timed = false;
  const auto by = run_cheats(o);
  // Without the checks that catch them, each is right and timed. (late_side_stream may be IMPLAUSIBLE
  // where the run has ceilings: half of its work escapes the window, which puts it under the floor.)
  expect_verdicts(by, {
                          {"honest", {Verdict::pass}},
                          {"reference_thief", {Verdict::pass}},
                          {"replay", {Verdict::pass}},
                          {"known_seeds", {Verdict::pass}},
                          {"late_side_stream", {Verdict::pass, Verdict::implausible}},
                      });
}

TEST(Cheats, HostWorkIsCaughtOnTimedSamplesWithoutTheAudit) {
  auto o = cheat_options({"cheats:scale:01_honest", "cheats:scale:16_host_compute"});
  o.audit = false;  // no CUPTI, no audited launches: the host-time rule on every timed sample remains
  const auto by = run_cheats(o);
  expect_verdicts(by, {{"honest", {Verdict::pass}}, {"host_compute", {Verdict::invalid}}});
  if (by.count("host_compute")) {
    EXPECT_NE(by.at("host_compute").reason.find("on the host"), std::string::npos) << by.at("host_compute").reason;
    EXPECT_NE(by.at("host_compute").reason.find("timed round"), std::string::npos) << by.at("host_compute").reason;
  }
}

}  // namespace
