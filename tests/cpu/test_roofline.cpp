// Roofline placement, the physics check's verdicts, results JSON with ceilings, and the roofline
// table and SVG (core/results/roofline.hpp).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/results/roofline.hpp"

namespace {

using namespace aisp;

CeilingEntry c(std::string name, std::string group, std::string_view unit, double v) {
  CeilingEntry e;
  e.name = std::move(name);
  e.group = std::move(group);
  e.unit = std::string(unit);
  e.value = v;
  e.method = "m";
  return e;
}

CeilingSet h100() {
  CeilingSet s;
  s.gpu_name = "NVIDIA H100 80GB HBM3";
  s.gpu_uuid = "GPU-test";
  s.driver_version = "580";
  s.l2_bytes = 50'000'000;
  s.entries = {c("dram_read", "dram", k_unit_gb_s, 3200), c("dram_write", "dram", k_unit_gb_s, 3100),
               c("dram_copy", "dram", k_unit_gb_s, 3000), c("l2_read", "l2", k_unit_gb_s, 10000),
               c("fp32_fma", "compute", k_unit_tflop_s, 60), c("tensor_bf16", "tensor", k_unit_tflop_s, 800),
               c("p2p_1_to_0_peer", "p2p", k_unit_gb_s, 400)};
  CeilingEntry fp8 = c("tensor_fp8", "tensor", k_unit_tflop_s, 0);
  fp8.skipped = "needs compute capability 8.9";
  s.entries.push_back(fp8);
  return s;
}

WorkDecl copy_work(double bytes) {
  WorkDecl w;
  w.bytes = bytes;
  return w;
}

TEST(Roofline, DramCeilingFollowsTheReadWriteMix) {
  EXPECT_EQ(dram_ceiling_for(0, 0), "dram_copy");
  EXPECT_EQ(dram_ceiling_for(100, 0), "dram_read");
  EXPECT_EQ(dram_ceiling_for(0, 100), "dram_write");
  EXPECT_EQ(dram_ceiling_for(50, 50), "dram_copy");
  EXPECT_EQ(dram_ceiling_for(80, 20), "dram_read");
  EXPECT_EQ(dram_ceiling_for(70, 30), "dram_copy");
  EXPECT_EQ(compute_ceiling_for("bf16"), "tensor_bf16");
  EXPECT_EQ(compute_ceiling_for("fp32"), "fp32_fma");
  EXPECT_EQ(compute_ceiling_for("e4m3"), "tensor_fp8");
  EXPECT_FALSE(compute_ceiling_for("int4"));
}

TEST(Roofline, MemoryBoundPlacement) {
  // 8 GB in 2.9 ms = 2759 GB/s = 91.95% of a 3000 GB/s copy ceiling.
  const auto o = place(copy_work(8e9), CacheMode::cold, 2.9, h100(), nullptr);
  ASSERT_TRUE(o.placement) << o.why_not;
  const auto& p = *o.placement;
  EXPECT_EQ(p.bound, "memory");
  EXPECT_EQ(p.ceiling, "dram_copy");
  EXPECT_EQ(p.unit, "GB/s");
  EXPECT_NEAR(p.achieved, 8e9 / 2.9e-3 * 1e-9, 1e-9);
  EXPECT_NEAR(p.percent, 100 * 8e9 / 2.9e-3 / 3000e9, 1e-9);
  EXPECT_NEAR(p.floor_ms, 8e9 / 3000e9 * 1e3, 1e-12);
  EXPECT_EQ(p.intensity, 0);
  EXPECT_EQ(p.physics, "ok");
  EXPECT_TRUE(o.implausible_reason.empty());
  // A read-mostly declaration is placed against the read ceiling.
  WorkDecl r = copy_work(8e9);
  r.bytes_read = 8e9;
  EXPECT_EQ(place(r, CacheMode::cold, 2.9, h100(), nullptr).placement->ceiling, "dram_read");
}

TEST(Roofline, ComputeBoundPlacementAndIntensity) {
  WorkDecl w;
  w.bytes = 3 * 8192.0 * 8192 * 2;  // bf16 GEMM 8192^3: A, B, C once
  w.flops = 2.0 * 8192 * 8192 * 8192;
  w.flop_dtype = "bf16";
  const double median_ms = w.flops / 700e12 * 1e3;  // 700 TFLOP/s
  const auto o = place(w, CacheMode::cold, median_ms, h100(), nullptr);
  ASSERT_TRUE(o.placement) << o.why_not;
  EXPECT_EQ(o.placement->bound, "compute");
  EXPECT_EQ(o.placement->ceiling, "tensor_bf16");
  EXPECT_NEAR(o.placement->achieved, 700, 1e-6);
  EXPECT_NEAR(o.placement->percent, 87.5, 1e-6);
  EXPECT_NEAR(o.placement->intensity, 8192.0 / 3, 1e-9);
  // A precision change declared by the variant moves the compute ceiling.
  TargetResult t;
  t.flops_per_launch = 1;
  t.flop_dtype = "fp32";
  VariantResult v;
  v.precision = "bf16";
  EXPECT_EQ(work_of(t, v).flop_dtype, "bf16");
}

TEST(Roofline, HotDataThatFitsInL2IsPlacedAgainstL2AndNotChecked) {
  const auto o = place(copy_work(20e6), CacheMode::hot, 0.002, h100(), nullptr);  // 10 TB/s
  ASSERT_TRUE(o.placement);
  EXPECT_EQ(o.placement->ceiling, "l2_read");
  EXPECT_NEAR(o.placement->percent, 100, 1e-9);
  EXPECT_EQ(o.placement->physics.rfind("not checked", 0), 0u) << o.placement->physics;
  EXPECT_TRUE(o.implausible_reason.empty());
  // Too big for the L2: DRAM, even when hot.
  EXPECT_EQ(place(copy_work(8e9), CacheMode::hot, 3, h100(), nullptr).placement->ceiling, "dram_copy");
}

TEST(PhysicsCheck, InflatedBytesAreImplausibleWithTheNumbers) {
  // An honest 8.59 GB copy at ~2.9 ms declared as 85.9 GB: ten times the DRAM ceiling.
  const auto o = place(copy_work(85.9e9), CacheMode::cold, 2.9, h100(), nullptr);
  ASSERT_TRUE(o.placement);
  EXPECT_EQ(o.placement->physics, "implausible");
  EXPECT_GT(o.placement->percent, 900);
  const std::string& why = o.implausible_reason;
  EXPECT_NE(why.find("physics floor"), std::string::npos) << why;
  // Its reads, and its writes beyond what the L2 can hold dirty, at the DRAM read rate.
  EXPECT_NE(why.find("42.95 GB read + the 42.9 GB written beyond the L2"), std::string::npos) << why;
  EXPECT_NE(why.find("3200 GB/s"), std::string::npos) << why;
  EXPECT_NE(why.find("DRAM read"), std::string::npos) << why;
  EXPECT_NE(why.find("8.59e+10"), std::string::npos) << why;  // the declared bytes are named
  EXPECT_NE(why.find("2.900 ms"), std::string::npos) << why;
}

TEST(PhysicsCheck, ThreePercentTolerance) {
  const double floor_ms = (4e9 + (4e9 - 50e6)) / 3200e9 * 1e3;  // reads + the writes beyond the L2
  EXPECT_EQ(place(copy_work(8e9), CacheMode::cold, 0.975 * floor_ms, h100(), nullptr).placement->physics, "ok");
  EXPECT_EQ(place(copy_work(8e9), CacheMode::cold, 0.965 * floor_ms, h100(), nullptr).placement->physics,
            "implausible");
  EXPECT_EQ(place(copy_work(8e9), CacheMode::cold, floor_ms, h100(), nullptr).placement->physics, "ok");
}

TEST(PhysicsCheck, ComputeFloorUsesTheHigherOfMeasuredAndDatasheet) {
  WorkDecl w;
  w.flops = 1e12;
  w.flop_dtype = "bf16";
  const double at_900 = 1e12 / 900e12 * 1e3;  // faster than the measured 800, slower than the sheet's 989
  const auto ds = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(ds);
  EXPECT_EQ(place(w, CacheMode::cold, at_900, h100(), nullptr).placement->physics, "implausible");
  const auto o = place(w, CacheMode::cold, at_900, h100(), &*ds);
  EXPECT_EQ(o.placement->physics, "ok");
  EXPECT_GT(o.placement->percent, 100) << "% of the measured ceiling may pass 100";
  const double at_1100 = 1e12 / 1100e12 * 1e3;
  const auto bad = place(w, CacheMode::cold, at_1100, h100(), &*ds);
  EXPECT_EQ(bad.placement->physics, "implausible");
  EXPECT_NE(bad.implausible_reason.find("datasheet"), std::string::npos) << bad.implausible_reason;
}

// A working set over the L2 whose writes still fit in it (ch12:pdl at 1024 rows: 33.5 MB read and 33.5 MB
// written, 67 MB > 50 MB): the writes may all stay dirty in the L2 when the kernel ends, so only the
// reads bound it. Measured on an H100 with the read flush: 21 us, where reads + writes at the copy
// ceiling would have floored it at 22 us.
TEST(PhysicsCheck, WritesThatFitInTheL2AreNotInTheFloorEvenWhenTheReadsDoNot) {
  WorkDecl w;
  w.bytes = 67e6;
  w.bytes_read = 33.5e6;
  w.bytes_written = 33.5e6;
  const double reads_floor_ms = 33.5e6 / 3200e9 * 1e3;
  const auto o = place(w, CacheMode::cold, 21e-3, h100(), nullptr);
  ASSERT_TRUE(o.placement);
  EXPECT_EQ(o.placement->physics, "ok") << o.implausible_reason;
  EXPECT_NEAR(o.placement->physics_floor_ms, reads_floor_ms, 1e-12);
  // Writes of 80 MB: 30 MB of them must reach DRAM inside the interval.
  w.bytes = 113.5e6;
  w.bytes_written = 80e6;
  EXPECT_NEAR(place(w, CacheMode::cold, 1.0, h100(), nullptr).placement->physics_floor_ms,
              (33.5e6 + 30e6) / 3200e9 * 1e3, 1e-12);
}

// A read stream may beat the DRAM read probe (a block-per-tile reduction measured 3% over it on an H100)
// but not the memory: the floor's rate is the higher of the measured and the datasheet read rate.
TEST(PhysicsCheck, DramFloorUsesTheHigherOfMeasuredAndDatasheet) {
  WorkDecl w;
  w.bytes = 1.074e9;
  w.bytes_read = 1.074e9;
  const auto ds = datasheet_for("NVIDIA H100 80GB HBM3");  // 3350 GB/s
  ASSERT_TRUE(ds);
  const double at_3280 = 1.074e9 / 3280e9 * 1e3;  // 2.5% over the measured 3200: within the tolerance
  EXPECT_EQ(place(w, CacheMode::cold, at_3280, h100(), nullptr).placement->physics, "ok");
  const double at_3400 = 1.074e9 / 3400e9 * 1e3;
  EXPECT_EQ(place(w, CacheMode::cold, at_3400, h100(), nullptr).placement->physics, "implausible");
  const auto o = place(w, CacheMode::cold, at_3400, h100(), &*ds);
  EXPECT_EQ(o.placement->physics, "ok") << "1.5% over the datasheet: inside the tolerance";
  EXPECT_GT(o.placement->percent, 100) << "% of the measured ceiling may pass 100";
  const double at_3600 = 1.074e9 / 3600e9 * 1e3;
  const auto bad = place(w, CacheMode::cold, at_3600, h100(), &*ds);
  EXPECT_EQ(bad.placement->physics, "implausible");
  EXPECT_NE(bad.implausible_reason.find("datasheet"), std::string::npos) << bad.implausible_reason;
}

TEST(PhysicsCheck, SmallColdWorkingSetsNeedOnlyTheirReadsFromDram) {
  // 40 MB copy (fits a 50 MB L2): writes may stay in L2, so the floor is the 20 MB of reads at 3200 GB/s.
  const double reads_floor_ms = 20e6 / 3200e9 * 1e3;
  const auto o = place(copy_work(40e6), CacheMode::cold, 1.1 * reads_floor_ms, h100(), nullptr);
  ASSERT_TRUE(o.placement);
  EXPECT_EQ(o.placement->physics, "ok");
  EXPECT_NEAR(o.placement->physics_floor_ms, reads_floor_ms, 1e-12);
  EXPECT_EQ(place(copy_work(40e6), CacheMode::cold, 0.5 * reads_floor_ms, h100(), nullptr).placement->physics,
            "implausible");
}

TEST(Roofline, ExplicitCeilingAndMissingOnes) {
  WorkDecl w = copy_work(1e9);
  w.memory_ceiling = "p2p_1_to_0_peer";
  const auto o = place(w, CacheMode::cold, 2.5, h100(), nullptr);  // 400 GB/s
  ASSERT_TRUE(o.placement);
  EXPECT_EQ(o.placement->ceiling, "p2p_1_to_0_peer");
  EXPECT_NEAR(o.placement->percent, 100, 1e-9);
  w.memory_ceiling = "p2p_2_to_0_peer";
  const auto missing = place(w, CacheMode::cold, 2.5, h100(), nullptr);
  EXPECT_FALSE(missing.placement);
  EXPECT_NE(missing.why_not.find("p2p_2_to_0_peer was not measured"), std::string::npos) << missing.why_not;
  WorkDecl f;
  f.flops = 1e12;
  f.flop_dtype = "fp8";
  const auto skipped = place(f, CacheMode::cold, 1, h100(), nullptr);
  EXPECT_FALSE(skipped.placement);
  EXPECT_NE(skipped.why_not.find("needs compute capability 8.9"), std::string::npos) << skipped.why_not;
  EXPECT_FALSE(place(WorkDecl{}, CacheMode::cold, 1, h100(), nullptr).placement);
}

VariantResult pass_with(const std::string& name, VariantKind kind, std::vector<double> samples) {
  VariantResult v;
  v.name = name;
  v.kind = kind;
  v.verdict = Verdict::pass;
  v.samples_ms = std::move(samples);
  return v;
}

TargetResult copy_target() {
  TargetResult t;
  t.name = "ch07:copy";
  t.mode = CacheMode::cold;
  t.bytes_per_launch = 8e9;
  t.baseline = "ch07:copy:01_a";
  t.variants.push_back(pass_with("ch07:copy:01_a", VariantKind::baseline, {4.0, 4.0, 4.1, 3.9, 4.0, 4.0, 4.0}));
  t.variants.push_back(pass_with("ch07:copy:02_b", VariantKind::step, {2.8, 2.8, 2.81, 2.79, 2.8, 2.8, 2.8}));
  // 8 GB in 1 ms is 8 TB/s: faster than a 3 TB/s DRAM allows.
  t.variants.push_back(pass_with("ch07:copy:03_cheat", VariantKind::step, {1.0, 1.0, 1.01, 0.99, 1.0, 1.0, 1.0}));
  derive_statistics(t);
  return t;
}

TEST(ApplyCeilings, PlacesPassVariantsAndMakesTheImpossibleImplausible) {
  TargetResult t = copy_target();
  ASSERT_TRUE(t.variants[2].speedup_vs_baseline);
  RunCeilings rc;
  rc.set = h100();
  rc.source = "artifacts/peaks/x.json";
  const auto changed = apply_ceilings(t, rc);
  EXPECT_EQ(changed, (std::vector<std::string>{"ch07:copy:03_cheat"}));
  EXPECT_EQ(t.variants[2].verdict, Verdict::implausible);
  EXPECT_NE(t.variants[2].reason.find("physics floor"), std::string::npos);
  EXPECT_FALSE(t.variants[2].speedup_vs_baseline) << "no speedups for an IMPLAUSIBLE variant";
  ASSERT_TRUE(t.variants[1].roofline);
  EXPECT_NEAR(t.variants[1].roofline->percent, 100 * 8e9 / 2.8e-3 / 3000e9, 1e-6);
  EXPECT_TRUE(t.variants[1].speedup_vs_baseline);
  ASSERT_TRUE(t.variants[2].roofline) << "the placement that proved it stays visible";
  // No ceilings: nothing placed, nothing judged.
  TargetResult u = copy_target();
  rc.problem = "no GPU";
  EXPECT_TRUE(apply_ceilings(u, rc).empty());
  EXPECT_EQ(u.variants[2].verdict, Verdict::pass);
  EXPECT_FALSE(u.variants[1].roofline);
}

TEST(ApplyCeilings, ResultsJsonRoundTripsCeilingsAndPlacements) {
  RunResults r;
  r.run_id = "x";
  r.hardware_key = "h100_sxm";
  r.ceilings = RunCeilings{"artifacts/peaks/x.json", "", h100()};
  r.targets.push_back(copy_target());
  apply_ceilings(r.targets[0], *r.ceilings);
  const std::string text = to_json(r).dump(2);
  const RunResults back = run_results_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(to_json(back).dump(2), text);
  ASSERT_TRUE(back.ceilings);
  EXPECT_EQ(back.ceilings->set.value("dram_copy"), 3000);
  ASSERT_TRUE(back.targets[0].variants[1].roofline);
  EXPECT_EQ(back.targets[0].variants[1].roofline->ceiling, "dram_copy");
}

TEST(ApplyCeilings, GoldenResultsCarryCeilingsAndPlacements) {
  std::ifstream in(std::string(AISP_TEST_DATA_DIR) + "/golden/results_v1.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const RunResults r = run_results_from_json(nlohmann::json::parse(ss.str()));
  ASSERT_TRUE(r.ceilings);
  EXPECT_TRUE(r.ceilings->problem.empty());
  EXPECT_TRUE(r.ceilings->set.value("dram_copy"));
  bool placed = false;
  for (const auto& v : r.targets.at(0).variants) {
    if (v.verdict == Verdict::pass) placed = placed || v.roofline.has_value();
  }
  EXPECT_TRUE(placed);
}

TEST(RooflineOutput, TableAndSvgOfARun) {
  RunResults r;
  r.run_id = "20261121T120000Z_ch07";
  r.ceilings = RunCeilings{"artifacts/peaks/x.json", "", h100()};
  r.targets.push_back(copy_target());
  TargetResult gemm;
  gemm.name = "ch10:gemm";
  gemm.bytes_per_launch = 4e8;
  gemm.flops_per_launch = 1.1e12;
  gemm.flop_dtype = "bf16";
  gemm.variants.push_back(pass_with("ch10:gemm:01_a<b>&c", VariantKind::baseline, {2, 2, 2, 2, 2, 2, 2}));
  derive_statistics(gemm);
  r.targets.push_back(gemm);
  for (auto& t : r.targets) apply_ceilings(t, *r.ceilings);

  const std::string table = render_roofline_table(r);
  EXPECT_NE(table.find("% of it"), std::string::npos) << table;
  EXPECT_NE(table.find("memory: DRAM copy (read + write) 3000 GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find("compute: BF16 tensor (dense) 800 TFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("IMPLAUSIBLE"), std::string::npos) << table;

  const roofline::Chart chart = roofline::chart_of(r);
  EXPECT_EQ(chart.points.size(), 4u);
  bool dram_roof = false, bf16_roof = false;
  for (const auto& roof : chart.roofs) {
    dram_roof = dram_roof || (roof.name == "dram_copy" && roof.memory);
    bf16_roof = bf16_roof || (roof.name == "tensor_bf16" && !roof.memory);
    EXPECT_NE(roof.name, "tensor_fp8") << "a skipped ceiling is no roof";
  }
  EXPECT_TRUE(dram_roof && bf16_roof);
  const std::string svg = roofline::render_svg(chart);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t circles = 0;
  for (std::size_t p = svg.find("<circle"); p != std::string::npos; p = svg.find("<circle", p + 1)) ++circles;
  EXPECT_EQ(circles, 4u);
  EXPECT_NE(svg.find("01_a&lt;b&gt;&amp;c"), std::string::npos) << "labels are escaped";
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"white\""), std::string::npos) << "zero-FLOP points are hollow";
  EXPECT_EQ(svg.find("nan"), std::string::npos) << "no NaN coordinates";
  EXPECT_EQ(svg.find("inf"), std::string::npos) << "no infinite coordinates";
}

// A sweep on one roofline (ch19:weight_only_gemv: 39 points) labels its points by hover titles only: the
// stacked labels of that many points ran off the plot and over each other.
TEST(RooflineSvg, ManyPointsAreLabelledByHoverTitlesOnly) {
  roofline::Chart chart;
  chart.roofs.push_back({"dram_read", "DRAM read", 3000, true});
  chart.roofs.push_back({"tensor_bf16", "BF16 tensor (dense)", 800, false});
  const auto point = [](int i) {
    return roofline::Point{fmt::format("p{:02}", i), "PASS", 0.5 + i, 1.0 + i, 1000, "memory", "dram_read", 50};
  };
  for (int i = 0; i < 18; ++i) chart.points.push_back(point(i));
  const auto count = [](const std::string& svg, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t p = svg.find(what); p != std::string::npos; p = svg.find(what, p + 1)) ++n;
    return n;
  };
  std::string svg = roofline::render_svg(chart);
  EXPECT_EQ(count(svg, "<title>p"), 18u);
  EXPECT_EQ(count(svg, "\">p"), 18u) << "18 points: each labelled";
  chart.points.push_back(point(18));
  svg = roofline::render_svg(chart);
  EXPECT_EQ(count(svg, "<title>p"), 19u) << "every point keeps its hover title";
  EXPECT_EQ(count(svg, "\">p"), 0u) << "19 points: no stacked labels";
  EXPECT_NE(svg.find("19 points: hover one for its name."), std::string::npos);
}

}  // namespace

namespace {

TEST(PhysicsCheck, AHostCopyIsFlooredByThePcieDatasheetRateNotItsMeasuredOne) {
  // 268 MB over a measured h2d_pinned of 51 GB/s is 5.26 ms; a run of the same copy a few minutes later
  // took 5.08 ms (53 GB/s, 4% faster: the host's side moved). The link's datasheet rate (64 GB/s) is the
  // floor: 4.19 ms.
  CeilingSet s = h100();
  s.entries.push_back(c("h2d_pinned", "host", k_unit_gb_s, 51));
  const auto sheet = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(sheet);
  WorkDecl w = copy_work(268.4e6);
  w.memory_ceiling = "h2d_pinned";
  const auto ok = place(w, CacheMode::cold, 5.08, s, &*sheet);
  ASSERT_TRUE(ok.placement);
  EXPECT_EQ(ok.placement->ceiling, "h2d_pinned");
  EXPECT_GT(ok.placement->percent, 103) << "placed against the measured rate";
  EXPECT_EQ(ok.placement->physics, "ok");
  // Faster than the link itself: implausible, and the reason names the datasheet's rate.
  const auto bad = place(w, CacheMode::cold, 3.5, s, &*sheet);
  ASSERT_TRUE(bad.placement);
  EXPECT_EQ(bad.placement->physics, "implausible");
  EXPECT_NE(bad.implausible_reason.find("datasheet"), std::string::npos) << bad.implausible_reason;
  // Without a datasheet the measured rate is the floor, as before.
  EXPECT_EQ(place(w, CacheMode::cold, 5.08, s, nullptr).placement->physics, "implausible");
}

TEST(PhysicsCheck, ADiskReadIsPlacedAgainstTheDiskButFlooredByTheLinkBehindIt) {
  // ch05 on nvidia-h200, 2026-11-28: 1.074 GB of O_DIRECT reads took a median 663 ms in the step, while the
  // disk probe's median pass minutes earlier read 1.564 GB/s (686 ms for these bytes). The disk's measured
  // rate is no bound (a virtual disk's backing store is shared); PCIe's datasheet rate is.
  CeilingSet s = h100();
  s.entries.push_back(c("disk_read", "disk", k_unit_gb_s, 1.564));
  s.entries.push_back(c("h2d_pinned", "host", k_unit_gb_s, 51));
  const auto sheet = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(sheet);
  WorkDecl w = copy_work(1.074e9);
  w.memory_ceiling = "disk_read";
  const auto ok = place(w, CacheMode::cold, 663, s, &*sheet);
  ASSERT_TRUE(ok.placement);
  EXPECT_EQ(ok.placement->ceiling, "disk_read");
  EXPECT_GT(ok.placement->percent, 103) << "placed against the disk's measured rate";
  EXPECT_EQ(ok.placement->physics, "ok");
  EXPECT_NEAR(ok.placement->physics_floor_ms, 1.074e9 / 64e9 * 1e3, 0.01) << "the PCIe datasheet rate";
  // Faster than the bytes can cross PCIe: implausible, and the reason names the link.
  const auto bad = place(w, CacheMode::cold, 10, s, &*sheet);
  ASSERT_TRUE(bad.placement);
  EXPECT_EQ(bad.placement->physics, "implausible");
  EXPECT_NE(bad.implausible_reason.find("host -> device"), std::string::npos) << bad.implausible_reason;
  // No datasheet: the link's measured rate. No link measured: not checked, and said so.
  EXPECT_NEAR(place(w, CacheMode::cold, 663, s, nullptr).placement->physics_floor_ms, 1.074e9 / 51e9 * 1e3, 0.01);
  s.entries.pop_back();
  const auto unchecked = place(w, CacheMode::cold, 663, s, nullptr);
  ASSERT_TRUE(unchecked.placement);
  EXPECT_EQ(unchecked.placement->physics.rfind("not checked", 0), 0u) << unchecked.placement->physics;
}

}  // namespace
