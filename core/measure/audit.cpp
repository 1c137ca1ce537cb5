#include "core/measure/audit.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace aisp {

namespace {

std::string describe(const ActivityRecord& r, std::uint32_t harness_stream) {
  const char* kind = r.kind == ActivityRecord::Kind::kernel   ? "kernel"
                     : r.kind == ActivityRecord::Kind::memcpy ? "copy"
                                                              : "memset";
  std::string stream = fmt::format("stream {}", r.stream);
  if (harness_stream != 0) stream += r.stream == harness_stream ? " (the harness stream)" : " (not the harness stream)";
  return fmt::format("{} '{}' on {}", kind, r.name, stream);
}

bool named(const ActivityRecord& r, const std::string& part) {
  return r.kind == ActivityRecord::Kind::kernel && !part.empty() && r.name.find(part) != std::string::npos;
}

}  // namespace

std::vector<std::string> find_window_escapes(const AuditWindowInput& in) {
  std::vector<ActivityRecord> blocks, markers, work;
  for (const auto& r : in.records) {
    if (named(r, in.blocking_kernel_name)) blocks.push_back(r);
    else if (named(r, in.end_marker_name)) markers.push_back(r);
    else work.push_back(r);
  }
  const auto by_start = [](const ActivityRecord& a, const ActivityRecord& b) { return a.start < b.start; };
  std::sort(blocks.begin(), blocks.end(), by_start);
  std::sort(markers.begin(), markers.end(), by_start);
  std::vector<std::string> findings;
  if (blocks.empty() || blocks.size() != markers.size()) {
    findings.push_back(fmt::format("audit windows unreadable: {} opening and {} closing records", blocks.size(),
                                   markers.size()));
    return findings;
  }
  for (const auto& r : work) {
    const bool declared_peer =
        std::find(in.peer_devices.begin(), in.peer_devices.end(), r.device) != in.peer_devices.end();
    if (r.device != in.device && !declared_peer) {
      findings.push_back(fmt::format("{} ran on device {}, not the harness's device {}", describe(r, in.harness_stream),
                                     r.device, in.device));
      continue;
    }
    if (r.end <= blocks.front().start) continue;  // before the first audited launch: set-up, not the variant
    // The window this record belongs to: the last one that opened (its blocking kernel started) before it.
    std::size_t w = 0;
    while (w + 1 < blocks.size() && blocks[w + 1].start <= r.start) ++w;
    const std::uint64_t open = blocks[w].end, close = markers[w].start;
    if (r.start < open) {
      findings.push_back(fmt::format("{} started {:.1f} us before the timed window opened: work not ordered "
                                     "on the harness stream",
                                     describe(r, in.harness_stream), (open - r.start) * 1e-3));
    } else if (r.end > close) {
      findings.push_back(fmt::format("{} ended {:.1f} us after the timed window closed: work not joined back "
                                     "into the harness stream",
                                     describe(r, in.harness_stream), (r.end - close) * 1e-3));
    }
  }
  return findings;
}

std::vector<std::string> find_timing_escapes(const AuditTimes& t) {
  std::vector<std::string> findings;
  if (t.drain_s > k_audit_max_drain_s) {
    findings.push_back(fmt::format("the device kept working {:.3f} ms after the end event: work escaped the "
                                   "timed window",
                                   t.drain_s * 1e3));
  }
  // One audited launch: the host-time rule of every timed sample, with a batch of one.
  if (auto f = find_host_work(t.host_launch_s, t.event_s, 1); !f.empty()) findings.push_back(std::move(f));
  return findings;
}

std::string find_host_work(double host_launch_s, double event_s, int batch) {
  const double n = std::max(batch, 1);
  const double host = host_launch_s / n, gpu = event_s / n;
  if (host <= std::max(k_audit_min_host_budget_s, 2 * gpu)) return {};
  return fmt::format("launch() spent {:.3f} ms on the host against {:.3f} ms on the GPU clock: work hidden "
                     "from the timed interval",
                     host * 1e3, gpu * 1e3);
}

bool host_work_is_finding(int flagged_samples, int samples) {
  return flagged_samples >= k_host_work_min_count &&
         flagged_samples >= k_host_work_min_fraction * std::max(samples, 1);
}

namespace {
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

std::int64_t AuditSchedule::audited_round_in_window(int k) const {
  const std::int64_t width = std::int64_t{1} << k;
  return width + static_cast<std::int64_t>(mix(m_seed ^ mix(static_cast<std::uint64_t>(k))) %
                                           static_cast<std::uint64_t>(width));
}

bool AuditSchedule::audits(std::int64_t round) const {
  if (round < 1) return false;
  int k = 0;
  while ((std::int64_t{2} << k) <= round) ++k;  // round is in [2^k, 2^(k+1))
  return audited_round_in_window(k) == round;
}

std::string find_state_dependence(const FreshInputTimes& t) {
  if (t.seen_s <= 0 || t.fresh_s <= 0) return {};
  const double ratio = t.fresh_s / t.seen_s;
  if (ratio <= k_fresh_max_ratio || t.fresh_s - t.seen_s <= k_fresh_min_noise_floors * t.noise_floor_s) return {};
  return fmt::format("result depends on state kept between launches: {:.2f}x slower on fresh inputs ({:.4g} ms "
                     "on inputs never seen before vs {:.4g} ms on inputs seen before; limit {:.2f}x)",
                     ratio, t.fresh_s * 1e3, t.seen_s * 1e3, k_fresh_max_ratio);
}

FreshInputOutcome judge_fresh_inputs(const FreshInputTimes& first, const FreshInputTimes* retest) {
  if (!needs_fresh_retest(first) || !retest || retest->fresh_s <= 0 || retest->seen_s <= 0) return {};
  const double first_ratio = first.fresh_s / first.seen_s, ratio = retest->fresh_s / retest->seen_s;
  if (auto f = find_state_dependence(*retest); !f.empty()) {
    return {.finding = fmt::format("{}; {:.2f}x in the first round", f, first_ratio)};
  }
  return {.note = fmt::format("fresh inputs: {:.2f}x slower in a first round, {:.2f}x on a retest with new seeds "
                              "(within the margin)",
                              first_ratio, ratio)};
}

}  // namespace aisp
