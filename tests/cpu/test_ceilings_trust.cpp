// When ceilings are refused (docs/ceilings.md): instrumentation tools recognised from the environment
// they give their target, values far under the datasheet refused on measuring and on loading, what a
// measuring pass may cache, and the provenance block of schema 2. Fixtures: tests/cpu/fixtures/ceilings.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/ceilings/ceilings.hpp"
#include "core/base/error.hpp"
#include "ceilings_fixtures.hpp"
#include "core/base/instrumentation.hpp"

namespace {

using namespace aisp;
using aisp::testing::measured;
namespace fs = std::filesystem;

const std::string k_fixtures = std::string(AISP_TEST_DATA_DIR) + "/fixtures/ceilings";

Environment read_env(const std::string& name) {
  std::ifstream in(k_fixtures + "/env/" + name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  Environment env;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

CeilingEntry skipped(std::string name, std::string group, std::string why) {
  CeilingEntry c = measured(std::move(name), std::move(group), k_unit_gb_s, 0);
  c.skipped = std::move(why);
  return c;
}

CeilingSet h100() {
  CeilingSet s;
  s.gpu_name = "NVIDIA H100 80GB HBM3";
  s.gpu_uuid = "GPU-7a1c9e42-3b5d-4f60-8e21-9c0d1b2a3f4e";
  s.driver_version = "580.159.04";
  s.hardware_key = "h100_sxm";
  s.cc = 90;
  s.sm_count = 132;
  s.l2_bytes = 50 << 20;
  s.aisp_git_sha = "abc";
  return s;
}

CeilingProvenance provenance() {
  CeilingProvenance p;
  p.git_dirty = "false";
  p.build_type = "RelWithDebInfo";
  p.written_utc = "2026-11-23T08:00:05Z";
  p.tool_free = true;
  p.tools_checked = std::string(instrumentation_checked());
  p.datasheet_rule = "every DRAM, FMA and tensor value is at least 50% of the datasheet";
  GpuTelemetry t;
  t.sm_clock_mhz = 1980;
  t.mem_clock_mhz = 2619;
  t.temperature_c = 41;
  t.throttle_reasons = 0;
  p.gpu_state = t;
  p.refused = {{"tensor_fp8", "tensor_fp8 = 612.0 TFLOP/s is 30.9% of ..."}};
  p.unconfirmed = {"launch_kernel"};
  return p;
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("aisp_trust_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// ---- instrumentation tools ------------------------------------------------------------------------

TEST(Instrumentation, EachToolsEnvironmentIsRecognised) {
  const auto sanitizer = detect_instrumentation(read_env("compute-sanitizer.env"));
  ASSERT_TRUE(sanitizer);
  EXPECT_EQ(sanitizer->tool, "compute-sanitizer");
  EXPECT_EQ(sanitizer->evidence, "NV_SANITIZER_INJECTION_PORT_BASE is set");
  EXPECT_EQ(instrumentation_tool(read_env("ncu.env")), "Nsight Compute (ncu)");
  EXPECT_EQ(instrumentation_tool(read_env("nsys.env")), "Nsight Systems (nsys)");
  EXPECT_EQ(instrumentation_tool(read_env("cupti_tracer.env")), "a CUDA injection library (libcupti_trace_injection.so)");
  EXPECT_EQ(instrumentation_tool(read_env("plain.env")), std::nullopt)
      << "jemalloc preloaded, an NVTX handler and an empty CUDA_INJECTION64_PATH are not a tool";
  EXPECT_EQ(instrumentation_tool({}), std::nullopt);
}

TEST(Instrumentation, EachMarkerAloneIsEnough) {
  // Tool versions differ in what they export: any one of these shows the tool.
  const std::vector<std::pair<Environment, std::string>> cases{
      {{{"NV_SANITIZER_INJECTION_PORT_BASE", "49152"}}, "compute-sanitizer"},
      {{{"NV_SANITIZER_INJECTION_PORT_RANGE_BEGIN", "0"}}, "compute-sanitizer"},  // older releases
      {{{"CUDA_INJECTION64_PATH", "/usr/local/cuda/compute-sanitizer/libsanitizer-collection.so"}}, "compute-sanitizer"},
      {{{"NSYS_PROFILING_SESSION_ID", "3"}}, "Nsight Systems (nsys)"},
      {{{"CUDA_INJECTION64_PATH", "/opt/nsys/target-linux-x64/libToolsInjection64.so"}}, "Nsight Systems (nsys)"},
      {{{"LD_PRELOAD", "/usr/lib/libjemalloc.so.2:/opt/nsys/libToolsInjectionProxy64.so"}}, "Nsight Systems (nsys)"},
      {{{"NVTX_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so"}}, "Nsight Systems (nsys)"},
      {{{"NV_COMPUTE_PROFILER_PERFWORKS_DIR", "/opt/ncu/target"}}, "Nsight Compute (ncu)"},
      {{{"NV_NSIGHT_INJECTION_PORT_BASE", "49152"}}, "Nsight Compute (ncu)"},
      {{{"LD_PRELOAD", "/opt/ncu/target/./libcuda-injection.so"}}, "Nsight Compute (ncu)"},
      {{{"NVPROF_ID", "1"}}, "nvprof"},
      {{{"NV_TPS_LAUNCH_TOKEN", "Interactive Profile"}}, "an Nsight tool"},
      {{{"LD_PRELOAD", "/opt/x/libTreeLauncherTargetInjection.so"}}, "an NVIDIA developer tool"},
      {{{"CUDA_INJECTION64_PATH", "libmy_tracer.so"}}, "a CUDA injection library (libmy_tracer.so)"},
  };
  for (const auto& [env, tool] : cases) {
    EXPECT_EQ(instrumentation_tool(env), tool) << env.begin()->first << "=" << env.begin()->second;
  }
}

TEST(Instrumentation, LookalikesAreNotTools) {
  const std::vector<Environment> cases{
      {{"NV_SANITIZER_INJECTION_PORT_BASE", ""}, {"NSYS_PROFILING_SESSION_ID", ""}},  // exported empty
      {{"LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libasan.so.8"}},
      {{"LD_PRELOAD", "/opt/compute-sanitizer/libmine.so"}},  // a folder named after a tool decides nothing
      {{"PATH", "/opt/nvidia/nsight-compute/2025.3.1:/usr/bin"}},
      {{"MY_NSYS_PROFILING_SESSION_ID", "1"}, {"XNV_COMPUTE_PROFILER_PERFWORKS_DIR", "/x"}},
      {{"NVTX_INJECTION64_PATH", "/opt/myteam/libnvtx_log.so"}},  // annotations only
      {{"CUDA_VISIBLE_DEVICES", "0"}, {"CUDA_LAUNCH_BLOCKING", "0"}},
  };
  for (const auto& env : cases) EXPECT_EQ(instrumentation_tool(env), std::nullopt) << env.begin()->first;
}

TEST(Instrumentation, RefusalIsOneLineNamingToolAndEvidence) {
  const auto t = detect_instrumentation(read_env("compute-sanitizer.env"));
  ASSERT_TRUE(t);
  const std::string line = instrumentation_refusal(*t);
  EXPECT_EQ(line.rfind("not measured under compute-sanitizer: NV_SANITIZER_INJECTION_PORT_BASE is set; ", 0), 0u)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_FALSE(instrumentation_checked().empty());
}

TEST(Instrumentation, AuditHintNamesTheToolAndTheWayOut) {
  const auto t = detect_instrumentation(read_env("compute-sanitizer.env"));
  ASSERT_TRUE(t);
  const std::string hint = instrumentation_audit_hint(*t);
  EXPECT_EQ(hint.rfind("; this run is under compute-sanitizer (NV_SANITIZER_INJECTION_PORT_BASE is set)", 0), 0u)
      << hint;
  EXPECT_NE(hint.find("measure without the tool"), std::string::npos) << hint;
  EXPECT_EQ(hint.find('\n'), std::string::npos);
}

TEST(Instrumentation, ProcessEnvironmentIsRead) {
  ASSERT_EQ(setenv("AISP_TRUST_TEST_VARIABLE", "a=b", 1), 0);
  const Environment env = process_environment();
  ASSERT_TRUE(env.count("AISP_TRUST_TEST_VARIABLE"));
  EXPECT_EQ(env.at("AISP_TRUST_TEST_VARIABLE"), "a=b") << "split at the first '=' only";
  unsetenv("AISP_TRUST_TEST_VARIABLE");
}

// ---- plausibility --------------------------------------------------------------------------------

TEST(CeilingTrust, SanitizerCacheIsRefusedOnLoadWithOneLineReason) {
  const std::string path = k_fixtures + "/h100_under_sanitizer_v1.json";
  const CacheLoad l = load_ceiling_cache(path, "GPU-7a1c9e42-3b5d-4f60-8e21-9c0d1b2a3f4e", "580.159.04");
  EXPECT_EQ(l.status, CacheLoad::Status::corrupt);
  EXPECT_FALSE(l.set) << "an implausible cache hands out no values";
  EXPECT_EQ(l.problem.rfind("dram_read = 181 GB/s is 5.4% of the H100 SXM datasheet's 3350 GB/s (under 50%)", 0), 0u)
      << l.problem;
  EXPECT_NE(l.problem.find("(and 2 more under half the datasheet)"), std::string::npos) << l.problem;
  EXPECT_EQ(l.problem.find('\n'), std::string::npos);
  // The file itself is well-formed: only the plausibility rule refuses it.
  std::ifstream in(path);
  EXPECT_NO_THROW(ceiling_set_from_json(nlohmann::json::parse(in)));
}

TEST(CeilingTrust, PlausibleVersion1CacheIsStillUsed) {
  const CacheLoad l =
      load_ceiling_cache(k_fixtures + "/h100_v1.json", "GPU-7a1c9e42-3b5d-4f60-8e21-9c0d1b2a3f4e", "580.159.04");
  ASSERT_EQ(l.status, CacheLoad::Status::ok) << l.problem;
  EXPECT_FALSE(l.set->provenance) << "version 1 has no provenance block";
  EXPECT_EQ(l.set->value("dram_read"), 3021.7);
  EXPECT_EQ(l.set->value("h2d_pinned"), 25.1) << "39% of the PCIe datasheet: the slot's speed, not refused";
  EXPECT_EQ(to_json(*l.set)["schema_version"], 1) << "written back in the shape it was read";
  EXPECT_FALSE(to_json(*l.set).contains("provenance"));
}

TEST(CeilingTrust, HalfTheDatasheetIsTheLine) {
  const CeilingSet s = h100();
  EXPECT_EQ(datasheet_check_value(s, measured("dram_read", "dram", k_unit_gb_s, 1675)), 3350);
  EXPECT_FALSE(implausible_ceiling(s, measured("dram_read", "dram", k_unit_gb_s, 1675)));
  const auto low = implausible_ceiling(s, measured("dram_read", "dram", k_unit_gb_s, 1674));
  ASSERT_TRUE(low);
  EXPECT_NE(low->find("dram_read = 1674 GB/s is 50.0% of the H100 SXM datasheet's 3350 GB/s"), std::string::npos)
      << *low;
  const auto tensor = implausible_ceiling(s, measured("tensor_bf16", "tensor", k_unit_tflop_s, 400));
  ASSERT_TRUE(tensor);
  EXPECT_NE(tensor->find("tensor_bf16 = 400.0 TFLOP/s is 40.4% of the H100 SXM datasheet's 989.0 TFLOP/s"),
            std::string::npos)
      << *tensor;
  EXPECT_TRUE(implausible_ceiling(s, measured("fp64_fma", "compute", k_unit_tflop_s, 10)));
}

TEST(CeilingTrust, NoDatasheetNoVerdict) {
  const CeilingSet s = h100();
  // Not the GPU's own ceilings: the host link, caches, launch overheads.
  EXPECT_FALSE(datasheet_check_value(s, measured("h2d_pinned", "host", k_unit_gb_s, 3)));
  EXPECT_FALSE(datasheet_check_value(s, measured("l2_read", "l2", k_unit_gb_s, 5)));
  EXPECT_FALSE(datasheet_check_value(s, measured("launch_kernel", "launch", k_unit_us, 900)));
  EXPECT_FALSE(datasheet_check_value(s, skipped("tensor_fp8", "tensor", "needs compute capability 8.9")));
  CeilingSet other = h100();
  other.gpu_name = "NVIDIA GeForce RTX 4090";
  EXPECT_FALSE(implausible_ceiling(other, measured("dram_read", "dram", k_unit_gb_s, 10)));
  CeilingSet mig = h100();
  mig.sm_count = 16;  // a 1g MIG slice: its share of the bandwidth, not the datasheet's
  EXPECT_FALSE(implausible_ceiling(mig, measured("dram_read", "dram", k_unit_gb_s, 400)));
  CeilingSet pcie = h100();
  pcie.gpu_name = "NVIDIA H100 PCIe";
  pcie.sm_count = 114;
  EXPECT_EQ(datasheet_check_value(pcie, measured("dram_copy", "dram", k_unit_gb_s, 1500)), 2000);
}

// ---- what a measuring pass may cache -------------------------------------------------------------

TEST(CeilingTrust, ImplausibleValueIsNotCachedAndTaintsTheUncheckable) {
  const std::vector<CeilingEntry> fresh{
      measured("dram_read", "dram", k_unit_gb_s, 181.2),      measured("dram_copy", "dram", k_unit_gb_s, 2950),
      measured("l2_read", "l2", k_unit_gb_s, 612),            measured("fp32_fma", "compute", k_unit_tflop_s, 59.8),
      measured("launch_kernel", "launch", k_unit_us, 2.5),    skipped("p2p", "p2p", "one GPU visible"),
  };
  const CacheDecision d = decide_cacheable(h100(), fresh, std::nullopt);
  std::vector<std::string> kept;
  for (const auto& e : d.keep) kept.push_back(e.name);
  EXPECT_EQ(kept, (std::vector<std::string>{"dram_copy", "fp32_fma", "p2p"}))
      << "values their datasheet vouches for, and skips, are kept";
  ASSERT_EQ(d.refused.size(), 3u);
  EXPECT_EQ(d.refused[0].first, "dram_read");
  EXPECT_EQ(d.refused[0].second.rfind("dram_read = 181 GB/s is 5.4% of the H100 SXM datasheet's 3350 GB/s", 0), 0u)
      << d.refused[0].second;
  EXPECT_EQ(d.refused[1].first, "l2_read");
  EXPECT_NE(d.refused[1].second.find("measured in the same pass as dram_read"), std::string::npos);
  EXPECT_EQ(d.refused[2].first, "launch_kernel");
  for (const auto& [name, why] : d.refused) EXPECT_EQ(why.find('\n'), std::string::npos) << name;
}

TEST(CeilingTrust, PlausiblePassIsCachedWhole) {
  const std::vector<CeilingEntry> fresh{measured("dram_read", "dram", k_unit_gb_s, 3021.7),
                                        measured("l2_read", "l2", k_unit_gb_s, 7810),
                                        measured("h2d_pinned", "host", k_unit_gb_s, 25.1)};
  const CacheDecision d = decide_cacheable(h100(), fresh, std::nullopt);
  EXPECT_EQ(d.keep.size(), 3u);
  EXPECT_TRUE(d.refused.empty());
  CeilingSet unknown = h100();
  unknown.gpu_name = "NVIDIA GeForce RTX 4090";
  EXPECT_EQ(decide_cacheable(unknown, {measured("dram_read", "dram", k_unit_gb_s, 1)}, std::nullopt).keep.size(), 1u)
      << "no datasheet, no verdict: the probes' own checks are all there is";
}

TEST(CeilingTrust, NothingIsCachedUnderATool) {
  const auto tool = detect_instrumentation(read_env("ncu.env"));
  ASSERT_TRUE(tool);
  const CacheDecision d = decide_cacheable(
      h100(), {measured("dram_read", "dram", k_unit_gb_s, 3000), skipped("p2p", "p2p", "one GPU visible")}, tool);
  EXPECT_TRUE(d.keep.empty());
  ASSERT_EQ(d.refused.size(), 2u);
  EXPECT_EQ(d.refused[0].second.rfind("not measured under Nsight Compute (ncu): ", 0), 0u) << d.refused[0].second;
}

TEST(CeilingTrust, SaveRefusesWhatLoadWouldRefuse) {
  const fs::path dir = temp_dir("save");
  const std::string path = (dir / "cache.json").string();
  CeilingSet s = h100();
  s.entries.push_back(measured("dram_read", "dram", k_unit_gb_s, 181.2));
  EXPECT_THROW(save_ceiling_cache(path, s), std::runtime_error);
  EXPECT_FALSE(fs::exists(path));
  s.entries = {measured("dram_read", "dram", k_unit_gb_s, 3000)};
  s.provenance = provenance();
  s.provenance->tool_free = false;
  EXPECT_THROW(save_ceiling_cache(path, s), std::runtime_error);
  EXPECT_FALSE(fs::exists(path));
  s.provenance->tool_free = true;
  save_ceiling_cache(path, s);
  EXPECT_EQ(load_ceiling_cache(path, s.gpu_uuid, s.driver_version).status, CacheLoad::Status::ok);
  fs::remove_all(dir);
}

TEST(CeilingTrust, ACacheThatSaysItWasNotToolFreeIsCorrupt) {
  const fs::path dir = temp_dir("toolfree");
  const std::string path = (dir / "cache.json").string();
  CeilingSet s = h100();
  s.entries = {measured("dram_read", "dram", k_unit_gb_s, 3000)};
  s.provenance = provenance();
  auto j = to_json(s);
  j["provenance"]["tool_free"] = false;
  std::ofstream(path) << j.dump(2);
  const CacheLoad l = load_ceiling_cache(path, s.gpu_uuid, s.driver_version);
  EXPECT_EQ(l.status, CacheLoad::Status::corrupt);
  EXPECT_NE(l.problem.find("tool-free"), std::string::npos) << l.problem;
  fs::remove_all(dir);
}

// ---- provenance (schema 2) -------------------------------------------------------------------------

TEST(CeilingProvenance, RoundTripsAsVersion2) {
  CeilingSet s = h100();
  s.entries = {measured("dram_read", "dram", k_unit_gb_s, 3021.7)};
  s.provenance = provenance();
  const auto j = to_json(s);
  EXPECT_EQ(j["schema_version"], k_peaks_schema_version);
  EXPECT_EQ(k_peaks_schema_version, 2);
  EXPECT_EQ(j["provenance"]["tool_free"], true);
  EXPECT_EQ(j["provenance"]["gpu_state"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(j["provenance"]["refused"][0]["name"], "tensor_fp8");
  const CeilingSet back = ceiling_set_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.provenance);
  EXPECT_EQ(to_json(back).dump(2), j.dump(2));
  EXPECT_EQ(back.provenance->unconfirmed, (std::vector<std::string>{"launch_kernel"}));
  auto missing = j;
  missing.erase("provenance");
  EXPECT_THROW(ceiling_set_from_json(missing), DataError) << "version 2 requires its provenance block";
  auto older = to_json(h100());
  EXPECT_EQ(older["schema_version"], 1) << "a set without provenance keeps the version-1 shape";
}

TEST(CeilingProvenance, PeaksTableSaysHowItWasMeasured) {
  PeaksReport r;
  r.set = h100();
  r.set.entries = {measured("dram_read", "dram", k_unit_gb_s, 3021.7)};
  r.set.provenance = provenance();
  r.path = "artifacts/peaks/x.json";
  r.cache_note = "measured now";
  r.errors = {{"tensor_fp8", "tensor_fp8 = 612.0 TFLOP/s is 30.9% of the H100 SXM datasheet's 1979.0 TFLOP/s"}};
  const std::string t = render_peaks_table(r);
  EXPECT_NE(t.find("provenance: written 2026-11-23T08:00:05Z by aisp abc (RelWithDebInfo), no instrumentation tool, "
                   "SM 1980 MHz, memory 2619 MHz, 41 C, clock events: none after the last probe"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("from a version-1 cache, not checked for tools: launch_kernel"), std::string::npos) << t;
  EXPECT_NE(t.find("refused as implausible"), std::string::npos) << t;
  r.set.provenance.reset();
  EXPECT_NE(render_peaks_table(r).find("provenance: none (a version-1 cache"), std::string::npos);
}

TEST(CeilingTrust, RefusalSummaryIsOneLine) {
  EXPECT_EQ(refusal_summary({{"a", "a is low"}}), "a is low");
  EXPECT_EQ(refusal_summary({{"a", "a is low"}, {"b", "b is low"}, {"c", "c x"}, {"d", "d y"}}),
            "a is low; b is low; also refused: c, d");
}

}  // namespace
