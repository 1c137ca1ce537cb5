// The disk's sequential read rate (group "disk"): a host property like the host <-> device copies, kept
// with the GPU's ceilings because ch05:file_to_gpu is placed against it. The measurement itself is
// host-only (core/ceilings/disk_read.cpp); the file lives where ch05's test file does (aisp_cache_dir()).
#include "core/ceilings/disk_read.hpp"
#include "device/probes_internal.hpp"

namespace aisp::probe {

void probe_disk(Context&, const std::vector<std::string>& wanted, ProbeResults& out) {
  if (!wants(wanted, "disk_read")) return;
  record(out, "disk_read", [] {
    const DiskReadResult r = measure_disk_read(DiskReadOptions{});
    if (!r.skipped.empty()) return skipped_entry("disk_read", "disk", k_unit_gb_s, r.skipped);
    CeilingEntry e = entry("disk_read", "disk", k_unit_gb_s, r.gb_per_s, r.method, r.samples);
    e.note = r.note;
    return e;
  });
}

}  // namespace aisp::probe
