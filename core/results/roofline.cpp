#include "core/results/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/results/render.hpp"

namespace aisp {

WorkDecl work_of(const TargetResult& t, const VariantResult& v) {
  WorkDecl w;
  w.bytes = t.bytes_per_launch;
  w.bytes_read = t.bytes_read_per_launch;
  w.bytes_written = t.bytes_written_per_launch;
  w.flops = t.flops_per_launch;
  w.flop_dtype = v.precision.empty() ? t.flop_dtype : v.precision;
  w.memory_ceiling = t.memory_ceiling;
  return w;
}

std::string_view dram_ceiling_for(double bytes_read, double bytes_written) {
  const double total = bytes_read + bytes_written;
  if (!(total > 0)) return "dram_copy";
  if (bytes_written < 0.25 * total) return "dram_read";
  if (bytes_read < 0.25 * total) return "dram_write";
  return "dram_copy";
}

std::optional<std::string> compute_ceiling_for(std::string_view dtype) {
  if (dtype == "fp32" || dtype == "f32") return "fp32_fma";
  if (dtype == "fp64" || dtype == "f64") return "fp64_fma";
  if (dtype == "tf32") return "tensor_tf32";
  if (dtype == "bf16") return "tensor_bf16";
  if (dtype == "fp16" || dtype == "f16") return "tensor_fp16";
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "e4m3") return "tensor_fp8";
  return std::nullopt;
}

namespace {

std::string missing_reason(const CeilingSet& s, const std::string& name) {
  const CeilingEntry* c = s.find(name);
  if (!c) return fmt::format("ceiling {} was not measured", name);
  return fmt::format("ceiling {} is not available here: {}", name, c->skipped);
}

double ms_at(double amount, double per_second) { return amount / per_second * 1e3; }

// The rate a physics floor is taken at: the measured one, or the datasheet's where that is higher (a kernel
// may beat our probe, never the hardware). `source` says which, for the reason's text.
struct FloorRate {
  double value;
  const char* source;
};
FloorRate floor_rate(double measured, const std::string& name, const Datasheet* datasheet) {
  if (datasheet) {
    if (const auto d = datasheet->value(name); d && *d > measured) return {*d, "datasheet"};
  }
  return {measured, "measured"};
}

// The ceiling whose rate bounds a cold launch's time from below when the named one's measured rate cannot:
// "disk_read" -> "h2d_pinned". A disk's rate is a host property with no datasheet to fall back on, and it
// moves between runs (a virtual disk shares its backing store: ch05's O_DIRECT step ran 3% faster than the
// probe's median pass minutes earlier on an nvidia-h200 host, 2026-11-28); every byte read from it still
// crosses the host -> device link, whose datasheet rate nothing beats. Empty for every other ceiling.
std::string_view physics_floor_link(std::string_view ceiling) { return ceiling == "disk_read" ? "h2d_pinned" : ""; }

}  // namespace

PlaceOutcome place(const WorkDecl& w, CacheMode mode, double median_ms, const CeilingSet& cs,
                   const Datasheet* datasheet) {
  PlaceOutcome out;
  if (!(median_ms > 0) || !std::isfinite(median_ms)) {
    out.why_not = "no median time";
    return out;
  }
  if (!(w.bytes > 0) && !(w.flops > 0)) {
    out.why_not = "the ladder declares no bytes and no FLOPs";
    return out;
  }
  const bool fits_l2 = cs.l2_bytes > 0 && w.bytes <= static_cast<double>(cs.l2_bytes);
  std::string mem_name;
  if (!w.memory_ceiling.empty()) {
    mem_name = w.memory_ceiling;
  } else if (mode == CacheMode::hot && fits_l2) {
    mem_name = "l2_read";  // hot data that fits in L2 is served from it (measurement.md)
  } else {
    mem_name = dram_ceiling_for(w.bytes_read, w.bytes_written);
  }
  std::optional<double> bw;
  if (w.bytes > 0) {
    bw = cs.value(mem_name);
    if (!bw) {
      out.why_not = missing_reason(cs, mem_name);
      return out;
    }
  }
  std::string comp_name;
  std::optional<double> rate;
  if (w.flops > 0) {
    const std::string dtype = w.flop_dtype.empty() ? "fp32" : w.flop_dtype;
    const auto name = compute_ceiling_for(dtype);
    if (!name) {
      out.why_not = fmt::format("no compute ceiling for FLOP dtype '{}'", dtype);
      return out;
    }
    comp_name = *name;
    rate = cs.value(comp_name);
    if (!rate) {
      out.why_not = missing_reason(cs, comp_name);
      return out;
    }
  }
  const double mem_ms = bw ? ms_at(w.bytes, *bw * 1e9) : 0;
  const double comp_ms = rate ? ms_at(w.flops, *rate * 1e12) : 0;
  const bool compute_bound = comp_ms > mem_ms;

  RooflinePlacement p;
  p.bound = compute_bound ? "compute" : "memory";
  p.ceiling = compute_bound ? comp_name : mem_name;
  p.unit = std::string(compute_bound ? k_unit_tflop_s : k_unit_gb_s);
  p.ceiling_value = compute_bound ? *rate : *bw;
  const double seconds = median_ms * 1e-3;
  p.achieved = compute_bound ? w.flops / seconds * 1e-12 : w.bytes / seconds * 1e-9;
  p.percent = 100 * p.achieved / p.ceiling_value;
  p.intensity = (w.bytes > 0 && w.flops > 0) ? w.flops / w.bytes : 0;
  p.floor_ms = std::max(mem_ms, comp_ms);

  if (mode == CacheMode::hot) {
    p.physics = "not checked: hot (data may be served from L2)";
    out.placement = p;
    return out;
  }
  // The physics floor of a cold launch: the bytes that must cross DRAM (or the named link) inside the
  // timed interval, and the FLOPs at the highest rate this GPU can reach for their dtype.
  std::vector<std::string> terms;
  double phys_mem_ms = 0;
  if (w.bytes > 0) {
    if (w.memory_ceiling.empty()) {
      // DRAM. Every read of a cold launch crosses DRAM inside the interval, but the L2 is write-back:
      // up to an L2's worth of the launch's writes may still sit in it, dirty, when the kernel ends
      // (the cold flush leaves clean lines; docs/measurement-methods.md), so only the writes beyond
      // that are sure to cross. The rate is the faster of the measured read ceiling and the datasheet's:
      // a kernel may beat the probe (a block-per-tile read stream measured 3% over it on an H100), not
      // the memory.
      const bool split = w.bytes_read > 0 || w.bytes_written > 0;
      const double reads = split ? w.bytes_read : w.bytes / 2;
      const double writes = split ? w.bytes_written : w.bytes / 2;
      const double l2 = static_cast<double>(cs.l2_bytes);
      const double spill = std::max(0.0, writes - l2);
      const std::string read_name = cs.value("dram_read") ? "dram_read" : mem_name;
      const auto [read_bw, source] = floor_rate(*cs.value(read_name), read_name, datasheet);
      phys_mem_ms = ms_at(reads + spill, read_bw * 1e9);
      const std::string what =
          spill > 0 ? fmt::format("{:.4g} GB read + the {:.4g} GB written beyond the L2", reads * 1e-9, spill * 1e-9)
                    : fmt::format("{:.4g} GB read{}", reads * 1e-9,
                                  split ? " (the writes may stay in L2)"
                                        : " (half the declared bytes; the writes may stay in L2)");
      terms.push_back(fmt::format("{} at the {} {} {:.0f} GB/s takes {}", what, source, ceiling_label(read_name),
                                  read_bw, format_duration_ms(phys_mem_ms)));
    } else if (const std::string_view via = physics_floor_link(mem_name); !via.empty()) {
      // Placed against the disk, floored by the link behind it (physics_floor_link says why).
      const std::string link(via);
      const std::optional<double> measured = cs.value(link);
      const auto [floor_bw, source] = floor_rate(measured.value_or(0), link, datasheet);
      if (!(floor_bw > 0)) {
        p.physics = fmt::format("not checked: {} has no bound of its own and {} was not measured",
                                ceiling_label(mem_name), ceiling_label(link));
        out.placement = p;
        return out;
      }
      phys_mem_ms = ms_at(w.bytes, floor_bw * 1e9);
      terms.push_back(fmt::format("{:.4g} GB at the {} {} {:.0f} GB/s, the link every byte read from {} crosses, "
                                  "takes {}",
                                  w.bytes * 1e-9, source, ceiling_label(link), floor_bw, mem_name,
                                  format_duration_ms(phys_mem_ms)));
    } else {
      // A named link (host <-> device over PCIe) is placed against its measured rate, but its floor is
      // its datasheet rate where the datasheet has one: a pinned copy's measured rate moves by ~5% from
      // run to run with the host's memory traffic (51 and 53 GB/s on one H100 host minutes apart), more
      // than the 3% tolerance, while no copy beats the link itself.
      const auto [floor_bw, source] = floor_rate(*bw, mem_name, datasheet);
      phys_mem_ms = ms_at(w.bytes, floor_bw * 1e9);
      terms.push_back(fmt::format("{:.4g} GB at the {} {} {:.0f} GB/s takes {}", w.bytes * 1e-9, source,
                                  ceiling_label(mem_name), floor_bw, format_duration_ms(phys_mem_ms)));
    }
  }
  double phys_comp_ms = 0;
  if (w.flops > 0) {
    const auto [best, source] = floor_rate(*rate, comp_name, datasheet);
    phys_comp_ms = ms_at(w.flops, best * 1e12);
    terms.push_back(fmt::format("{:.4g} GFLOP at the {} {} {:.4g} TFLOP/s takes {}", w.flops * 1e-9, source,
                                ceiling_label(comp_name), best, format_duration_ms(phys_comp_ms)));
  }
  p.physics_floor_ms = std::max(phys_mem_ms, phys_comp_ms);
  if (median_ms < (1 - k_physics_tolerance) * p.physics_floor_ms) {
    p.physics = "implausible";
    std::string why;
    for (const auto& t : terms) why += (why.empty() ? "" : "; ") + t;
    out.implausible_reason = fmt::format(
        "median {} is {:.0f}% under the physics floor {} ({}): the declared work (bytes_per_launch {:.4g}, "
        "flops_per_launch {:.4g}) is larger than what ran, or the kernel skipped work",
        format_duration_ms(median_ms), 100 * (1 - median_ms / p.physics_floor_ms),
        format_duration_ms(p.physics_floor_ms), why, w.bytes, w.flops);
  } else {
    p.physics = "ok";
  }
  out.placement = p;
  return out;
}

std::vector<std::string> apply_ceilings(TargetResult& t, const RunCeilings& c) {
  std::vector<std::string> changed;
  if (!c.problem.empty()) return changed;
  const auto datasheet = datasheet_for(c.set.gpu_name);
  for (auto& v : t.variants) {
    v.roofline.reset();
    if (!v.stats || (v.verdict != Verdict::pass && v.verdict != Verdict::noisy)) continue;
    const PlaceOutcome o =
        place(work_of(t, v), t.mode, v.stats->median, c.set, datasheet ? &*datasheet : nullptr);
    if (!o.placement) {
      v.notes.push_back("no % of ceiling: " + o.why_not);
      continue;
    }
    v.roofline = o.placement;
    if (!o.implausible_reason.empty()) {
      v.verdict = Verdict::implausible;
      v.reason = o.implausible_reason;
      changed.push_back(v.name);
    }
  }
  // Speedups are only ever between PASS variants: recompute them without the implausible ones.
  if (!changed.empty()) derive_statistics(t, t.noise_floor_ms);
  return changed;
}

roofline::Chart roofline::chart_of(const RunResults& r) {
  Chart chart;
  chart.title = "roofline: " + r.run_id;
  if (!r.ceilings || !r.ceilings->problem.empty()) return chart;
  const CeilingSet& s = r.ceilings->set;
  if (!s.gpu_name.empty()) chart.title += " on " + s.gpu_name;
  std::vector<std::string> memory{"dram_copy", "l2_read"};
  for (const auto& t : r.targets) {
    for (const auto& v : t.variants) {
      if (v.roofline && v.roofline->bound == "memory" &&
          std::find(memory.begin(), memory.end(), v.roofline->ceiling) == memory.end()) {
        memory.push_back(v.roofline->ceiling);
      }
    }
  }
  for (const auto& name : memory) {
    if (const auto bw = s.value(name)) chart.roofs.push_back({name, ceiling_label(name), *bw, true});
  }
  for (const auto& c : s.entries) {
    if (c.measured() && c.unit == k_unit_tflop_s) {
      chart.roofs.push_back({c.name, ceiling_label(c.name), c.value, false});
    }
  }
  for (const auto& t : r.targets) {
    for (const auto& v : t.variants) {
      if (!v.roofline) continue;
      chart.points.push_back({v.name, std::string(to_string(v.verdict)), v.roofline->intensity, v.tflop_per_s,
                              v.gb_per_s, v.roofline->bound, v.roofline->ceiling, v.roofline->percent});
    }
  }
  return chart;
}

std::string render_roofline_table(const RunResults& r) {
  std::string out;
  if (!r.ceilings) {
    out += "no ceilings recorded in this run (it predates them, or the lookup was not made)\n";
  } else if (!r.ceilings->problem.empty()) {
    out += "no ceilings for this run: " + r.ceilings->problem + "\n";
  } else {
    out += fmt::format("ceilings: measured on {} ({}), from {}\n", r.ceilings->set.gpu_name,
                       r.ceilings->set.gpu_uuid, r.ceilings->source);
  }
  using Row = std::vector<std::string>;
  for (const auto& t : r.targets) {
    std::vector<Row> rows{{"variant", "FLOP/byte", "achieved", "bound (ceiling)", "% of it", "floor", "verdict"}};
    for (const auto& v : t.variants) {
      const std::string name = v.name.substr(std::min(v.name.size(), t.name.size() + 1));
      if (!v.roofline) {
        rows.push_back({name, "-", "-", "-", "-", "-", std::string(to_string(v.verdict))});
        continue;
      }
      const auto& p = *v.roofline;
      rows.push_back({name, p.intensity > 0 ? fmt::format("{:.3g}", p.intensity) : "0 (no FLOPs)",
                      fmt::format("{:.4g} {}", p.achieved, p.unit),
                      fmt::format("{}: {} {:.4g} {}", p.bound, ceiling_label(p.ceiling), p.ceiling_value, p.unit),
                      fmt::format("{:.1f}%", p.percent), format_duration_ms(p.floor_ms),
                      std::string(to_string(v.verdict))});
    }
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    out += fmt::format("\n{} ({} L2)\n", t.name, to_string(t.mode));
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        line += fmt::format("{:<{}}", row[i], i + 1 == row.size() ? 0 : width[i] + 2);
      }
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace aisp
