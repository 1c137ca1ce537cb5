// `aisp profile` end to end under Nsight Compute: every variant of ch07:copy yields DRAM throughput, every
// later step that loads through the LSU needs fewer L1 sectors per global-load request than the chunked
// baseline, and the optimized variant moves the declared DRAM bytes. Skipped (with the reason) where ncu is
// missing or cannot read the counters.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "core/profile/profile.hpp"
#include "device/device_info.hpp"
#include "device/ladder.hpp"
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
  // The smallest power of two that moves ten L2s per launch (2^27 on a 60 MiB L2): below that, written
  // data still in L2 when the kernel ends keeps the DRAM bytes from being held to the declaration.
  const double l2 = static_cast<double>(query_device(0).l2_bytes);
  std::int64_t n = std::int64_t{1} << 24;
  while (8.0 * static_cast<double>(n) < profile::k_l2_margin * l2) n *= 2;
  o.axis_overrides = {{"n", n}};
  o.set = profile::MetricSet::memory;
  o.ncu = ncu;
  o.out_dir = out.string();
  o.timeout_s = 120;
  std::ostringstream progress;
  const ProfileOutcome p = run_profiles(o, progress);
  if (!p.machine_wide_error.empty()) GTEST_SKIP() << p.machine_wide_error;
  ASSERT_EQ(p.data.targets.size(), 1u) << progress.str();
  const auto& t = p.data.targets[0];
  EXPECT_EQ(t.bytes_per_launch, 2.0 * 4.0 * static_cast<double>(n));
  const TargetInfo* info = nullptr;
  const auto catalogue = LadderRegistry::instance().catalogue();
  for (const auto& c : catalogue) {
    if (c.name() == "ch07:copy") info = &c;
  }
  ASSERT_TRUE(info);
  const auto kind_of = [&](const std::string& name) {
    for (const auto& v : info->variants) {
      if (info->variant_name(v) == name) return v.kind;
    }
    return VariantKind::step;
  };
  const profile::VariantProfileData* chunked = nullptr;
  const profile::VariantProfileData* optimized = nullptr;
  std::vector<const profile::VariantProfileData*> lsu_steps;  // steps whose loads go through the LSU
  for (const auto& v : t.variants) {
    const bool vendor = v.name.find(":vendor_") != std::string::npos;
    // cudaMemcpyAsync may run on a copy engine, which kernel replay does not see.
    if (vendor && v.status == profile::Status::no_kernels) continue;
    ASSERT_EQ(v.status, profile::Status::profiled) << v.name << ": " << v.reason << "\n" << progress.str();
    ASSERT_TRUE(v.launch.values.count("dram__bytes.sum.per_second")) << v.name;
    EXPECT_GT(v.launch.values.at("dram__bytes.sum.per_second"), 1e9) << v.name;
    EXPECT_TRUE(fs::exists(out / v.report)) << v.report;
    const VariantKind kind = kind_of(v.name);
    if (kind == VariantKind::baseline) chunked = &v;
    if (kind == VariantKind::optimized) optimized = &v;
    if (kind != VariantKind::baseline && v.launch.values.count(profile::k_ld_sectors_per_request)) {
      lsu_steps.push_back(&v);
    }
  }
  ASSERT_TRUE(chunked && optimized);
  ASSERT_TRUE(chunked->name.ends_with(":01_chunked"));
  const auto spr = [](const profile::VariantProfileData* v) {
    return v->launch.values.at(profile::k_ld_sectors_per_request);
  };
  ASSERT_FALSE(lsu_steps.empty());
  for (const auto* v : lsu_steps) EXPECT_LT(spr(v), spr(chunked)) << v->name;
  // An optimized step that copies with TMA bulk copies issues no LSU global loads at all: nothing to
  // compare per request, and the L1 sees none of its bytes.
  if (optimized->launch.values.count(profile::k_ld_sectors_per_request)) {
    EXPECT_LT(spr(optimized), spr(chunked));
  } else {
    EXPECT_EQ(optimized->launch.values.count("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum") &&
                  optimized->launch.values.at("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum") > 0,
              false);
  }
  ASSERT_TRUE(optimized->bytes);
  EXPECT_TRUE(optimized->bytes->judged) << "L2 " << t.l2_bytes;
  EXPECT_FALSE(optimized->bytes->mismatch) << "measured/declared " << optimized->bytes->ratio;
  EXPECT_TRUE(fs::exists(out / "profile.json"));
  fs::remove_all(out);
}

}  // namespace
