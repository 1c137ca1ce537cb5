// `aisp profile` end to end under Nsight Compute: every variant of ch07:copy yields DRAM throughput, and
// the optimized step needs fewer L1 sectors per global-load request than the chunked baseline. Skipped
// (with the reason) where ncu is missing or cannot read the counters.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "core/profile.hpp"
#include "device/profiler.hpp"

namespace {

using namespace aisp;
namespace fs = std::filesystem;

TEST(Profile, CopyLadderUnderNsightCompute) {
  std::string ncu;
  try {
    ncu = find_ncu("");
  } catch (const ProfilerMissing& e) {
    GTEST_SKIP() << e.what();
  }
  const fs::path out = fs::temp_directory_path() / ("aisp_gpu_test_profile_" + std::to_string(getpid()));
  fs::remove_all(out);
  ProfileOptions o;
  o.selectors = {"ch07:copy"};
  o.axis_overrides = {{"n", std::int64_t{1} << 24}};  // 134 MB per launch: well past L2, quick to replay
  o.set = profile::MetricSet::memory;
  o.ncu = ncu;
  o.out_dir = out.string();
  o.timeout_s = 120;
  std::ostringstream progress;
  const ProfileOutcome p = run_profiles(o, progress);
  if (!p.machine_wide_error.empty()) GTEST_SKIP() << p.machine_wide_error;
  ASSERT_EQ(p.data.targets.size(), 1u) << progress.str();
  const auto& t = p.data.targets[0];
  EXPECT_EQ(t.bytes_per_launch, 2.0 * 4.0 * (1 << 24));
  const profile::VariantProfileData* chunked = nullptr;
  const profile::VariantProfileData* optimized = nullptr;
  for (const auto& v : t.variants) {
    const bool vendor = v.name.find(":vendor_") != std::string::npos;
    // cudaMemcpyAsync may run on a copy engine, which kernel replay does not see.
    if (vendor && v.status == profile::Status::no_kernels) continue;
    ASSERT_EQ(v.status, profile::Status::profiled) << v.name << ": " << v.reason << "\n" << progress.str();
    ASSERT_TRUE(v.launch.values.count("dram__bytes.sum.per_second")) << v.name;
    EXPECT_GT(v.launch.values.at("dram__bytes.sum.per_second"), 1e9) << v.name;
    EXPECT_TRUE(fs::exists(out / v.report)) << v.report;
    if (v.name.ends_with(":01_chunked")) chunked = &v;
    if (v.name.ends_with(":04_in_flight")) optimized = &v;
  }
  ASSERT_TRUE(chunked && optimized);
  const auto spr = [](const profile::VariantProfileData* v) {
    return v->launch.values.at(profile::k_ld_sectors_per_request);
  };
  EXPECT_LT(spr(optimized), spr(chunked));
  ASSERT_TRUE(optimized->bytes);
  EXPECT_FALSE(optimized->bytes->mismatch) << "measured/declared " << optimized->bytes->ratio;
  EXPECT_TRUE(fs::exists(out / "profile.json"));
  fs::remove_all(out);
}

}  // namespace
