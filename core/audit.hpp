// The audit's rules (docs/trust.md), as pure functions of what was recorded: every kernel, copy and memset
// of an audited launch must start after the window opens, end before it closes, and run on the harness's
// device; launch() must not hide host work from the GPU clock; nothing may keep running after the end event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aisp {

struct ActivityRecord {
  enum class Kind { kernel, memcpy, memset } kind = Kind::kernel;
  std::string name;          // kernel name, or "memcpy" / "memset"
  std::uint64_t start = 0;   // ns, CUPTI's clock
  std::uint64_t end = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;  // CUPTI stream id
};

struct AuditWindowInput {
  std::vector<ActivityRecord> records;  // everything recorded during the audit
  std::uint32_t device = 0;             // the harness's device
  std::vector<std::uint32_t> peer_devices;  // devices the variant declares it works on too (feature "peer_gpu")
  std::uint32_t harness_stream = 0;     // CUPTI id of the harness stream (0 = unknown)
  std::string blocking_kernel_name;     // substring naming the kernel that holds the stream (window opens at its end)
  std::string end_marker_name;          // substring naming the kernel that marks the window's close (its start)
};

// Findings from the activity records, one line each; empty when every record is inside its window.
std::vector<std::string> find_window_escapes(const AuditWindowInput& in);

struct AuditTimes {
  double host_launch_s = 0;  // time the host spent inside launch()
  double event_s = 0;        // the timed interval on the GPU clock
  double drain_s = 0;        // time until the device was idle after the end event completed
};

// Findings from the host-side timings: work hidden on the host, or left running after the window.
std::vector<std::string> find_timing_escapes(const AuditTimes& t);

// Thresholds, documented in docs/trust.md.
inline constexpr double k_audit_max_drain_s = 1e-3;
inline constexpr double k_audit_min_host_budget_s = 1e-3;

}  // namespace aisp
