// The profiler hand-off without a GPU: ncu command lines for every set and replay mode, the raw-CSV parser
// on captured `ncu --import --csv --page raw` output (tests/cpu/fixtures/ncu/), the per-launch combination,
// the declared-vs-measured DRAM bytes check, the comparison table and the reading of ncu's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/profile/profile.hpp"
#include "core/results/results.hpp"

namespace {

using namespace aisp;
using namespace aisp::profile;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(AISP_TEST_DATA_DIR) + "/fixtures/ncu/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fixtures were captured from ch07:copy at n = 2^28: 2 * 4 bytes * 2^28 declared per launch.
constexpr double k_declared = 2.0 * 4.0 * (1 << 28);

std::vector<std::string>::const_iterator find_arg(const std::vector<std::string>& argv,
                                                  const std::string& a) {
  return std::find(argv.begin(), argv.end(), a);
}

std::string arg_after(const std::vector<std::string>& argv, const std::string& a) {
  const auto it = find_arg(argv, a);
  return it == argv.end() || it + 1 == argv.end() ? std::string("<absent>") : *(it + 1);
}

TEST(ProfileCommand, EverySetAndReplayMode) {
  for (MetricSet set : {MetricSet::minimal, MetricSet::memory, MetricSet::compute, MetricSet::full}) {
    for (ReplayMode mode : {ReplayMode::kernel, ReplayMode::application, ReplayMode::range}) {
      CaptureRequest r;
      r.ncu = "/usr/local/cuda/bin/ncu";
      r.set = set;
      r.replay = mode;
      r.report = "/tmp/x/01_chunked.ncu-rep";
      r.app = {"/opt/aisp", "__profile-worker", "--config", "/tmp/x/01_chunked.config.json"};
      const auto argv = capture_command(r);
      const std::string what = std::string(to_string(set)) + "/" + std::string(to_string(mode));
      EXPECT_EQ(argv.front(), r.ncu) << what;
      EXPECT_EQ(arg_after(argv, "--replay-mode"), std::string(to_string(mode))) << what;
      EXPECT_EQ(arg_after(argv, "--clock-control"), "none")
          << what << ": clocks must stay as found by default";
      EXPECT_EQ(arg_after(argv, "--cache-control"), "all") << what;
      EXPECT_EQ(arg_after(argv, "--export"), r.report) << what;
      EXPECT_NE(find_arg(argv, "--nvtx"), argv.end()) << what;
      EXPECT_EQ(arg_after(argv, "--nvtx-include"), "regex:profile:.*/") << what;
      std::string metrics;
      for (const auto& m : set_spec(set).metrics) metrics += (metrics.empty() ? "" : ",") + m;
      EXPECT_EQ(arg_after(argv, "--metrics"), metrics) << what;
      EXPECT_TRUE(std::equal(r.app.rbegin(), r.app.rend(), argv.rbegin()))
          << what << ": the worker comes last";
      EXPECT_EQ(arg_after(argv, "--set"), set == MetricSet::full ? "full" : "<absent>") << what;
      const bool sections = set == MetricSet::compute;
      EXPECT_EQ(arg_after(argv, "--section"), sections ? "ComputeWorkloadAnalysis" : "<absent>") << what;
    }
  }
}

TEST(ProfileCommand, ClocksChangeOnlyWhenAskedAndHotTargetsKeepCaches) {
  CaptureRequest r;
  r.ncu = "ncu";
  r.report = "r.ncu-rep";
  r.app = {"aisp"};
  r.lock_clocks_to_base = true;
  r.flush_caches = false;
  const auto argv = capture_command(r);
  EXPECT_EQ(arg_after(argv, "--clock-control"), "base");
  EXPECT_EQ(arg_after(argv, "--cache-control"), "none");
}

TEST(ProfileCommand, ExportAndRangeNames) {
  EXPECT_EQ(export_command("ncu", "a b.ncu-rep"),
            (std::vector<std::string>{"ncu", "--import", "a b.ncu-rep", "--csv", "--page", "raw",
                                      "--print-units", "base"}));
  EXPECT_EQ(nvtx_range_name("ch07:copy:01_chunked"), "profile:ch07:copy:01_chunked");
  EXPECT_EQ(quote_command({"ncu", "--nvtx-include", "regex:profile:.*/", "a b", "it's"}),
            "ncu --nvtx-include 'regex:profile:.*/' 'a b' 'it'\\''s'");
}

TEST(ProfileSets, NamesRoundTripAndMinimalCoversTheBrief) {
  for (const char* s : {"minimal", "memory", "compute", "full"})
    EXPECT_EQ(to_string(*metric_set_from_string(s)), s);
  EXPECT_FALSE(metric_set_from_string("everything"));
  EXPECT_FALSE(replay_mode_from_string("graph"));
  const auto& m = set_spec(MetricSet::minimal).metrics;
  for (const char* want :
       {"gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread"}) {
    EXPECT_NE(std::find(m.begin(), m.end(), want), m.end()) << want;
  }
  const auto& full = set_spec(MetricSet::full).metrics;
  for (MetricSet s : {MetricSet::minimal, MetricSet::memory, MetricSet::compute}) {
    for (const auto& name : set_spec(s).metrics) {
      EXPECT_EQ(std::count(full.begin(), full.end(), name), 1) << name << " once in full";
    }
  }
}

TEST(RawCsv, CapturedMemoryProfiles) {
  const auto chunked = parse_raw_csv(fixture("ch07_copy_01_chunked.memory.raw.csv"));
  const auto in_flight = parse_raw_csv(fixture("ch07_copy_04_in_flight.memory.raw.csv"));
  ASSERT_EQ(chunked.size(), 1u);
  ASSERT_EQ(in_flight.size(), 1u);
  EXPECT_NE(chunked[0].name.find("copy_chunked_kernel"), std::string::npos) << chunked[0].name;
  EXPECT_EQ(chunked[0].block, "(256, 1, 1)");
  ASSERT_TRUE(chunked[0].metrics.count("gpu__time_duration.sum"));
  EXPECT_EQ(chunked[0].metrics.at("gpu__time_duration.sum").unit, "ns");
  EXPECT_EQ(chunked[0].metrics.at("dram__bytes_read.sum").unit, "byte");
  EXPECT_FALSE(chunked[0].metrics.count("Process ID")) << "identity columns are not metrics";

  const auto a = combine_launch(chunked), b = combine_launch(in_flight);
  ASSERT_TRUE(a.values.count(k_ld_sectors_per_request));
  ASSERT_TRUE(b.values.count(k_ld_sectors_per_request));
  // A float4 load of a full warp covers 512 contiguous bytes: 16 sectors per request.
  EXPECT_NEAR(b.values.at(k_ld_sectors_per_request), 16.0, 0.5);
  EXPECT_GT(a.values.at(k_ld_sectors_per_request), b.values.at(k_ld_sectors_per_request));
  const auto check = check_bytes(b, k_declared);
  ASSERT_TRUE(check);
  EXPECT_FALSE(check->mismatch) << "ratio " << check->ratio;
  EXPECT_NEAR(check->measured, b.values.at("dram__bytes_read.sum") + b.values.at("dram__bytes_write.sum"),
              1.0);
}

TEST(RawCsv, CapturedBulkAsyncCopyHasNoLsuRequests) {
  // TMA bulk copies bypass the LSU: no global-load requests, so no sectors per request to show, and the L1
  // sees none of the bytes; DRAM still moves the declared bytes.
  const auto m = combine_launch(parse_raw_csv(fixture("ch07_copy_05_bulk_async.memory.raw.csv")));
  EXPECT_FALSE(m.values.count(k_ld_sectors_per_request));
  EXPECT_EQ(m.values.at("l1tex__t_bytes.sum"), 0);
  const auto check = check_bytes(m, k_declared, 60.0 * (1 << 20));
  ASSERT_TRUE(check);
  EXPECT_TRUE(check->judged);
  EXPECT_FALSE(check->mismatch) << check->ratio;
}

TEST(RawCsv, CapturedComputeProfile) {
  TargetProfileData t;
  t.name = "ch07:copy";
  VariantProfileData v;
  v.name = "ch07:copy:03_vectorized";
  v.status = Status::profiled;
  v.kernels = parse_raw_csv(fixture("ch07_copy_03_vectorized.compute.raw.csv"));
  v.launch = combine_launch(v.kernels);
  t.variants = {v};
  for (const auto& r : set_spec(MetricSet::compute).rows) EXPECT_TRUE(v.launch.values.count(r.key)) << r.key;
  const std::string text = render_comparison(comparison_table(t, MetricSet::compute));
  // A copy waits on memory: the top stall is the long scoreboard, and no tensor pipe is busy.
  EXPECT_NE(text.find("stall #1 (warps per issue)"), std::string::npos) << text;
  EXPECT_NE(text.find("long_scoreboard"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor pipes, max % active"), std::string::npos) << text;
  EXPECT_NE(text.find("pipe lsu"), std::string::npos) << text;
}

TEST(RawCsv, CapturedMinimalProfile) {
  const auto k = parse_raw_csv(fixture("ch07_copy_03_vectorized.minimal.raw.csv"));
  ASSERT_EQ(k.size(), 1u);
  const auto m = combine_launch(k);
  for (const auto& r : set_spec(MetricSet::minimal).rows) EXPECT_TRUE(m.values.count(r.key)) << r.key;
  EXPECT_GT(m.values.at("gpu__time_duration.sum"), 0);
  EXPECT_GT(m.values.at("dram__throughput.avg.pct_of_peak_sustained_elapsed"), 10);
  EXPECT_GT(m.values.at("launch__registers_per_thread"), 0);
}

TEST(RawCsv, ScaledUnitsSeparatorsAndChatter) {
  const std::string text =
      "==PROF== Connected to process 7 (/x/aisp)\n"
      "\"ID\",\"Kernel "
      "Name\",\"dram__bytes_read.sum\",\"gpu__time_duration.sum\",\"dram__bytes.sum.per_second\","
      "\"launch__shared_mem_per_block_static\",\"device__attribute_display_name\"\n"
      "\"\",\"\",\"Gbyte\",\"usecond\",\"Tbyte/second\",\"Kbyte/block\",\"\"\n"
      "\"0\",\"k(int, \"\"q\"\")\",\"1.50\",\"1,234.5\",\"2.5\",\"16.896\",\"NVIDIA H100\"\n"
      "\"1\",\"k2\",\"0.50\",\"765.5\",\"n/a\",\"0\",\"NVIDIA H100\"\n";
  const auto k = parse_raw_csv(text);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "k(int, \"q\")");
  EXPECT_DOUBLE_EQ(k[0].metrics.at("dram__bytes_read.sum").value, 1.5e9);
  EXPECT_DOUBLE_EQ(k[0].metrics.at("gpu__time_duration.sum").value, 1234.5e3);
  EXPECT_EQ(k[0].metrics.at("gpu__time_duration.sum").unit, "ns");
  EXPECT_DOUBLE_EQ(k[0].metrics.at("dram__bytes.sum.per_second").value, 2.5e12);
  EXPECT_EQ(k[0].metrics.at("dram__bytes.sum.per_second").unit, "byte/s");
  EXPECT_NEAR(k[0].metrics.at("launch__shared_mem_per_block_static").value, 16896, 1e-9);
  EXPECT_EQ(k[1].text.at("dram__bytes.sum.per_second"), "n/a");
  EXPECT_EQ(k[0].text.at("device__attribute_display_name"), "NVIDIA H100");
  // Two kernels of one launch: bytes and time add, rates weigh by time, resources take the maximum.
  const auto m = combine_launch(k);
  EXPECT_DOUBLE_EQ(m.values.at("dram__bytes_read.sum"), 2.0e9);
  EXPECT_DOUBLE_EQ(m.values.at("gpu__time_duration.sum"), 2.0e6);
  EXPECT_DOUBLE_EQ(m.values.at(k_kernel_count), 2.0);
  EXPECT_DOUBLE_EQ(m.values.at("dram__bytes.sum.per_second"), 2.5e12) << "n/a cells do not count";
}

TEST(RawCsv, MalformedInputIsOneLineDataError) {
  EXPECT_THROW(parse_raw_csv("==ERROR== the application returned an error code (1)\n"), DataError);
  EXPECT_THROW(parse_raw_csv("\"ID\",\"a\"\n"), DataError);
  EXPECT_THROW(parse_raw_csv("\"ID\",\"a\"\n\"\",\"\"\n\"0\",\"1\",\"2\"\n"), DataError);
  EXPECT_THROW(parse_raw_csv("\"ID\",\"a\n"), DataError);
  try {
    parse_raw_csv("nothing here");
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

LaunchMetrics with_dram(double bytes) {
  LaunchMetrics m;
  m.values["dram__bytes_read.sum"] = bytes / 2;
  m.values["dram__bytes_write.sum"] = bytes / 2;
  m.values[k_dram_bytes] = bytes;
  return m;
}

TEST(DeclaredBytes, TenPercentEitherWay) {
  EXPECT_FALSE(check_bytes(with_dram(1.05e9), 1e9)->mismatch);
  EXPECT_FALSE(check_bytes(with_dram(0.95e9), 1e9)->mismatch);
  EXPECT_TRUE(check_bytes(with_dram(1.15e9), 1e9)->mismatch);
  EXPECT_TRUE(check_bytes(with_dram(0.85e9), 1e9)->mismatch);
  EXPECT_NEAR(check_bytes(with_dram(2e9), 1e9)->ratio, 2.0, 1e-12);
  EXPECT_FALSE(check_bytes(LaunchMetrics{}, 1e9)) << "no DRAM counters, no check";
  EXPECT_FALSE(check_bytes(with_dram(1e9), 0)) << "nothing declared, no check";
}

TEST(DeclaredBytes, TheLeanestVariantJudgesTheDeclaration) {
  const auto c = [](double ratio) { return *check_bytes(with_dram(ratio * 1e9), 1e9); };
  // A wasteful baseline does not make the declaration wrong: the lean variant matches it.
  EXPECT_EQ(declaration_finding({{"01_chunked", c(1.6)}, {"04_in_flight", c(1.01)}}), "");
  EXPECT_NE(declaration_finding({{"01_chunked", c(1.6)}, {"04_in_flight", c(1.3)}}).find("too low"),
            std::string::npos);
  EXPECT_NE(declaration_finding({{"01_chunked", c(1.0)}, {"04_in_flight", c(0.5)}}).find("overstates"),
            std::string::npos);
  EXPECT_EQ(declaration_finding({}), "");
}

TEST(DeclaredBytes, NotJudgedWhenWritesCanStayInL2) {
  // 33.5 MB declared on a 50 MB L2 (ch07:copy at n = 2^22): half the writes were still in L2 at the end.
  const auto small = check_bytes(with_dram(0.52 * 33.5e6), 33.5e6, 50e6);
  ASSERT_TRUE(small);
  EXPECT_FALSE(small->judged);
  EXPECT_FALSE(small->mismatch);
  EXPECT_EQ(declaration_finding({{"03_vectorized", *small}}), "");
  const auto large = check_bytes(with_dram(0.52 * 2.15e9), 2.15e9, 50e6);
  EXPECT_TRUE(large->judged);
  EXPECT_TRUE(large->mismatch);
  TargetProfileData t;
  t.name = "ch07:copy";
  t.bytes_per_launch = 33.5e6;
  t.l2_bytes = 50e6;
  VariantProfileData v;
  v.name = "ch07:copy:03_vectorized";
  v.status = Status::profiled;
  v.launch = with_dram(0.52 * 33.5e6);
  v.bytes = small;
  t.variants = {v};
  const std::string text = render_comparison(comparison_table(t, MetricSet::memory));
  EXPECT_NE(text.find("not judged"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.52x !"), std::string::npos) << text;
}

TargetProfileData two_variants() {
  TargetProfileData t;
  t.name = "ch07:copy";
  t.axes["n"] = 1 << 28;
  t.bytes_per_launch = k_declared;
  VariantProfileData a;
  a.name = "ch07:copy:01_chunked";
  a.status = Status::profiled;
  a.kernels = parse_raw_csv(fixture("ch07_copy_01_chunked.memory.raw.csv"));
  a.launch = combine_launch(a.kernels);
  a.bytes = check_bytes(a.launch, k_declared);
  VariantProfileData b = a;
  b.name = "ch07:copy:04_in_flight";
  b.kernels = parse_raw_csv(fixture("ch07_copy_04_in_flight.memory.raw.csv"));
  b.launch = combine_launch(b.kernels);
  b.bytes = check_bytes(b.launch, k_declared);
  VariantProfileData c;
  c.name = "ch07:copy:vendor_memcpy";
  c.status = Status::no_kernels;
  c.reason = "the launch ran no kernel";
  t.variants = {a, b, c};
  return t;
}

TEST(ComparisonTable, VariantsAsColumnsMetricsAsRows) {
  const auto table = comparison_table(two_variants(), MetricSet::memory);
  EXPECT_EQ(table.columns,
            (std::vector<std::string>{"metric", "01_chunked", "04_in_flight", "vendor_memcpy"}));
  for (const auto& r : table.rows) EXPECT_EQ(r.size(), table.columns.size()) << r.front();
  EXPECT_EQ(table.rows[0][0], "kernel");
  EXPECT_EQ(table.rows[0][1], "copy_chunked_kernel");
  EXPECT_EQ(table.rows[0][3], "(no kernels)");
  const auto row = [&](const std::string& label) {
    for (const auto& r : table.rows) {
      if (r.front() == label) return r;
    }
    return std::vector<std::string>{};
  };
  ASSERT_EQ(row("global load sectors / request").size(), 4u);
  EXPECT_EQ(row("global load sectors / request")[2], "16.00");
  EXPECT_EQ(row("global load sectors / request")[3], "-");
  ASSERT_EQ(row("DRAM bytes / declared").size(), 4u);
  // Captured: the baseline moved about twice the declared bytes (flagged), the in-flight step 0.99x.
  EXPECT_EQ(row("DRAM bytes / declared")[1].back(), '!');
  EXPECT_EQ(row("DRAM bytes / declared")[2], "0.99x");
  const std::string text = render_comparison(table);
  EXPECT_NE(text.find("ch07:copy"), std::string::npos);
  EXPECT_NE(text.find("vendor_memcpy: no_kernels: the launch ran no kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("consistent"), std::string::npos) << text;
}

TEST(ComparisonTable, ComputeRowsReadPipesAndStallsByPattern) {
  TargetProfileData t;
  t.name = "x:y";
  VariantProfileData v;
  v.name = "x:y:01_a";
  v.status = Status::profiled;
  v.launch.kernel_names = {"void ns::gemm_kernel<128>(float*)"};
  v.launch.values = {{"sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active", 61.0},
                     {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 12.5},
                     {"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 4.0},
                     {"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", 1.0},
                     {"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 0.5}};
  t.variants = {v};
  const auto table = comparison_table(t, MetricSet::compute);
  const std::string text = render_comparison(table);
  EXPECT_NE(text.find("gemm_kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor pipes, max % active"), std::string::npos);
  EXPECT_NE(text.find("12.5%"), std::string::npos);
  EXPECT_NE(text.find("pipe fma, % of issue peak"), std::string::npos);
  EXPECT_NE(text.find("long_scoreboard 4.00"), std::string::npos) << text;
  EXPECT_EQ(text.find("selected 1.00"), std::string::npos) << "issuing is not a stall";
}

TEST(NcuOutput, PermissionErrorIsNamedInOneLine) {
  const std::string cause = diagnose_ncu_output(fixture("err_nvgpuctrperm.log"));
  EXPECT_NE(cause.find("ERR_NVGPUCTRPERM"), std::string::npos) << cause;
  EXPECT_EQ(cause.find('\n'), std::string::npos);
  EXPECT_TRUE(is_machine_wide(cause));
  EXPECT_EQ(diagnose_ncu_output(fixture("no_kernels.log")), "");
  EXPECT_TRUE(no_kernels_profiled(fixture("no_kernels.log")));
  const std::string other =
      diagnose_ncu_output("==PROF== x\n==ERROR== Failed to prepare kernel for profiling\n");
  EXPECT_EQ(other, "ncu: Failed to prepare kernel for profiling");
  EXPECT_FALSE(is_machine_wide(other));
  const std::string range = diagnose_ncu_output(fixture("range_record_status_empty.log"));
  EXPECT_NE(range.find("RecordStatusEmpty"), std::string::npos) << range;
  EXPECT_FALSE(is_machine_wide(range));
  EXPECT_TRUE(is_machine_wide(diagnose_ncu_output(
      "==ERROR== Profiling failed because a driver resource was unavailable. Ensure that no other tool (like "
      "DCGM) is concurrently collecting profiling data.\n")));
}

TEST(ProfileInResults, RoundTripsAndIsAbsentWhenNotTaken) {
  VariantResult v;
  v.name = "ch07:copy:04_in_flight";
  v.verdict = Verdict::pass;
  EXPECT_FALSE(to_json(v).contains("profile"));
  const auto t = two_variants();
  v.profile = summarize(t.variants[1], MetricSet::memory);
  v.profile->report = "profile/ch07-copy/04_in_flight.ncu-rep";
  v.profile->json = "profile/profile.json";
  const auto back = variant_result_from_json(nlohmann::json::parse(to_json(v).dump()));
  ASSERT_TRUE(back.profile);
  EXPECT_EQ(back.profile->set, "memory");
  EXPECT_EQ(back.profile->report, v.profile->report);
  EXPECT_EQ(back.profile->metrics, v.profile->metrics);
  ASSERT_TRUE(back.profile->dram_bytes_ratio);
  EXPECT_NEAR(*back.profile->dram_bytes_ratio, *v.profile->dram_bytes_ratio, 1e-12);
  EXPECT_FALSE(back.profile->bytes_mismatch);
  const auto failed = summarize(t.variants[2], MetricSet::memory);
  EXPECT_EQ(failed.error, "no_kernels: the launch ran no kernel");
  EXPECT_TRUE(failed.metrics.empty());
}

TEST(ProfileJson, CarriesEveryKernelAndTheCheck) {
  ProfileRunData run;
  run.set = MetricSet::memory;
  run.targets = {two_variants()};
  const auto j = to_json(run);
  EXPECT_EQ(j["schema"], "aisp.profile");
  EXPECT_EQ(j["clock_control"], "none");
  const auto& v = j["targets"][0]["variants"];
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0]["status"], "profiled");
  EXPECT_EQ(v[0]["kernels"].size(), 1u);
  EXPECT_TRUE(v[0]["kernels"][0]["metrics"].contains("dram__bytes_read.sum"));
  EXPECT_FALSE(v[1]["dram_bytes_check"]["mismatch"].get<bool>());
  EXPECT_TRUE(v[2]["dram_bytes_check"].is_null());
  EXPECT_EQ(j["targets"][0]["declaration_finding"], "");
}

TEST(FormatValue, Units) {
  EXPECT_EQ(format_value(692416, Format::duration_ns), "692.42 us");
  EXPECT_EQ(format_value(3.1018e12, Format::bytes_per_second), "3.10 TB/s");
  EXPECT_EQ(format_value(2147483648, Format::bytes), "2.15 GB");
  EXPECT_EQ(format_value(92.314, Format::percent), "92.3%");
  EXPECT_EQ(format_value(16, Format::count), "16");
  EXPECT_EQ(format_value(0, Format::bytes), "0 B");
}

}  // namespace
