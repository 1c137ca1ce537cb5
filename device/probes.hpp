// `aisp hw peaks`: this machine's ceilings, measured by the project's own probes, each validated, and
// cached per GPU UUID and driver (docs/ceilings.md). `bench run` asks for them through
// obtain_run_ceilings(), which re-executes aisp as a worker to measure what the cache lacks, so that
// the parent process stays light on CUDA.
#pragma once

#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/ceilings/ceilings.hpp"
#include "core/base/device_facts.hpp"

namespace aisp {

// A probe whose output is wrong: an error, never a number.
class ProbeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Measuring was refused before any probe ran: this process runs under an instrumentation tool
// (core/base/instrumentation.hpp). The message is instrumentation_refusal's one line.
class MeasurementRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The driver version that keys the cache: NVML's ("580.159.04"), else "cuda-<cudaDriverGetVersion>".
std::string peaks_driver_version();

// The cache file for a device: <dir>/<uuid>_<driver>.json.
std::string peaks_cache_file(const std::string& dir, const DeviceFacts& d);

struct PeaksOptions {
  int device = 0;
  std::vector<std::string> groups;  // empty = all (core/ceilings/ceilings.hpp ceiling_groups())
  bool refresh = false;             // re-measure everything asked for, not only what the cache lacks
  std::string dir = "artifacts/peaks";
  std::function<void(const std::string&)> progress;  // one line per probe (may be empty)
};

struct PeaksOutcome {
  CeilingSet set;                // the cache as written (or as read, when nothing was missing)
  std::string path;
  std::string cache_note;        // "reused", "measured", or what was wrong with the old file
  std::vector<std::string> measured;                         // names measured and cached by this call
  std::vector<std::pair<std::string, std::string>> errors;   // name -> why (never cached): probe errors,
                                                             // then values refused (decide_cacheable)
};

// Loads the cache, measures what it lacks (everything with `refresh`), keeps what decide_cacheable
// allows and writes it atomically with a provenance block; refused values land in `errors`. A corrupt
// or implausible cache is reported in cache_note, moved aside and re-measured. Throws MeasurementRefused
// under an instrumentation tool (before any CUDA call), UsageError for a bad group or device.
PeaksOutcome measure_peaks(const PeaksOptions& options);

// Runs the probes of `names` on `device` in this process; errors per probe, never thrown.
struct ProbeResults {
  std::vector<CeilingEntry> entries;
  std::vector<std::pair<std::string, std::string>> errors;
};
ProbeResults run_probes(int device, const std::vector<std::string>& names,
                        const std::function<void(const std::string&)>& progress);

// The parent side of `bench run`: the placement ceilings of `device`, from the cache, measuring what it
// lacks in a worker process (`<self> __worker --peaks ...`, its output in `log_path`). Never throws:
// when there are none, RunCeilings::problem says why. Under an instrumentation tool it only reads: a
// valid cache is used as it is, nothing is measured or written, and without one the problem is
// instrumentation_refusal's line. When the worker refused a value the run asked for (implausible),
// the run gets no ceilings and the problem gives the refusal.
RunCeilings obtain_run_ceilings(const DeviceFacts& device, const std::string& dir, const std::string& log_path,
                                double timeout_s, std::ostream& progress);

}  // namespace aisp
