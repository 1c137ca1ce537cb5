// CUPTI activity records, loaded at run time with dlopen: every kernel, copy and memset the process runs,
// with its device, stream and start/end timestamps. The audit (device/harness.cpp) uses them to catch work
// that escapes the timed window (docs/trust.md). Absent CUPTI is reported, not fatal.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/measure/audit.hpp"

namespace aisp {


class ActivityRecorder {
 public:
  // nullptr with `why_not` filled when libcupti cannot be loaded or refuses to record.
  static std::unique_ptr<ActivityRecorder> create(std::string* why_not);
  ~ActivityRecorder();

  void start();                              // enables kernel, memcpy and memset records
  std::vector<ActivityRecord> stop();        // flushes, disables, returns what was recorded since start
  std::uint32_t stream_id(cudaStream_t s) const;  // CUPTI's id of a stream (0 when unknown)

  struct Api;
 private:
  explicit ActivityRecorder(std::shared_ptr<Api> api) : m_api(std::move(api)) {}
  std::shared_ptr<Api> m_api;
};

}  // namespace aisp
