// Writes tests/cpu/golden/results_v1.json (run by hand when the schema gains a field):
//   g++ -std=c++20 -I. -DFMT_HEADER_ONLY tests/cpu/golden/tools/make_results_golden.cpp core/results/results.cpp \
//       core/measure/stats.cpp core/base/registry.cpp core/measure/verdict.cpp -o /tmp/g && /tmp/g > tests/cpu/golden/results_v1.json
#include <iostream>
#include "core/results/results.hpp"
using namespace aisp;
int main() {
  RunResults r; r.run_id = "20261121T120000Z_ch07-copy"; r.created_utc = "2026-11-21T12:00:00Z"; r.hardware_key = "h100_sxm";
  TargetResult t; t.name = "ch07:copy"; t.summary = "device-to-device copy of n fp32 elements"; t.axes["n"] = 1073741824;
  t.bytes_per_launch = 8589934592.0; t.baseline = "ch07:copy:01_chunked"; t.vendor = "ch07:copy:vendor_memcpy"; t.noise_floor_ms = 0.0025;
  VariantResult a; a.name = "ch07:copy:01_chunked"; a.step = 1; a.slug = "chunked"; a.kind = VariantKind::baseline; a.summary = "each thread copies its own chunk";
  a.verdict = Verdict::pass; a.validation = Validation{}; a.validation->seeds = {608135816, 2242054355}; a.validation->elements_checked = 3221225472; a.validation->timed_output_checked = true;
  a.audit = AuditRecord{"cupti", 2, 0.011, 9.5, 0.004, {}};
  a.telemetry = TelemetryRecord{1980, 1980, 412.5, 51, {}, false};
  a.facts = {{"regs", "16"}, {"local_bytes", "0"}, {"smem_bytes", "0"}, {"blocks_per_sm", "8"}, {"occupancy_pct", "100.0"}};
  a.samples_ms = {9.5, 9.25, 9.75, 9.5, 9.5, 9.625, 9.375, 9.5, 9.5, 9.5};
  VariantResult b = a; b.facts.clear(); b.name = "ch07:copy:02_wrong"; b.step = 2; b.slug = "wrong"; b.kind = VariantKind::step; b.summary = "writes the wrong values";
  b.verdict = Verdict::fail; b.reason = "2 of 1073741824 elements of 'dst' out of tolerance (mismatch)"; b.samples_ms.clear();
  b.validation->failed_check = "mismatch"; b.validation->output_name = "dst"; b.validation->mismatches = 2; b.validation->max_abs_error = 1.0; b.validation->max_rel_error = 2.5;
  b.validation->first_mismatches = {{7, 1.5, 0.5}, {1024, -0.25, 0.75}}; b.validation->timed_output_checked = false; b.validation->seeds = {608135816}; b.audit = AuditRecord{"cupti", 2, 0.01, 9.0, 0.002, {}}; b.telemetry.reset();
  VariantResult c = a; c.facts.clear(); c.name = "ch07:copy:vendor_memcpy"; c.step = 0; c.slug = "memcpy"; c.kind = VariantKind::vendor; c.summary = "cudaMemcpyAsync";
  c.samples_ms = {2.875, 2.875, 2.9375, 2.8125, 2.875, 2.875, 2.875, 2.875, 2.875, 2.875}; c.notes = {"an example note"}; c.audit = AuditRecord{"cupti", 2, 0.009, 2.875, 0.003, {}};
  t.variants = {a, b, c}; derive_statistics(t, t.noise_floor_ms); r.targets = {t};
  std::cout << to_json(r).dump(2) << "\n";
}
