// Shared by the probe families (device/probes_*.cpp): the per-device context, the timing rule every
// probe follows, and the families themselves. Not for use outside the probes and their tests.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/ceilings/ceilings.hpp"
#include "core/base/device_facts.hpp"
#include "device/probes.hpp"
#include "device/timer.hpp"

namespace aisp::probe {

// One device's stream and timers. Makes `device` current.
class Context {
 public:
  explicit Context(int device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return m_device; }
  const DeviceFacts& facts() const { return m_facts; }
  cudaStream_t stream() const { return m_stream; }
  void make_current() const;
  SampleTimer& cold();  // flushes the L2 before each sample
  SampleTimer& hot();   // back-to-back

 private:
  int m_device;
  DeviceFacts m_facts;
  cudaStream_t m_stream = nullptr;
  std::unique_ptr<SampleTimer> m_cold, m_hot;
};

// How every probe runs (docs/ceilings.md "How a probe runs"): a checked launch (prepare, launch,
// synchronize, check), warm-up, timed samples until the stopping rule is met, then one more timed
// sample prepared and checked like the first. `check` returns "" when the output is right.
struct Steps {
  std::function<void()> launch;
  std::function<void()> prepare;
  std::function<std::string()> check;
  int batch = 1;          // launches per timed sample
  bool blocking = true;   // queue behind the blocking kernel (false for launches that synchronize)
};

struct Timing {
  double median_s = 0;   // per launch
  std::size_t samples = 0;
};

// Throws ProbeError (naming `what`) when a check fails.
Timing run_steps(SampleTimer& timer, cudaStream_t stream, const Steps& steps, std::string_view what);

CeilingEntry entry(std::string name, std::string group, std::string_view unit, double value, std::string method,
                   std::size_t samples);
CeilingEntry skipped_entry(std::string name, std::string group, std::string_view unit, std::string why);
std::string utc_now();
std::string gib(double bytes);  // "4 GiB", "256 MiB"

// The families. Each appends an entry (measured or skipped) or an error for every name of `wanted` it
// owns; a CUDA error costs the entry it happened in.
using Family = void (*)(Context&, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_dram(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_l2(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_smem(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_compute(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_tensor(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_host(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_disk(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_p2p(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);
void probe_launch(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out);

bool wants(const std::vector<std::string>& wanted, std::string_view name);

// The two methods of a tensor ceiling ("tensor_bf16", ...) one at a time, for the tests; probe_tensor
// runs both and keeps the faster. Both throw ProbeError on a wrong output; the wgmma one also where it
// cannot run, and wgmma_unavailable() says why ("" where it can: compute capability 9.0 and sm_90a code).
CeilingEntry cublaslt_tensor_entry(Context& ctx, std::string_view name);
CeilingEntry wgmma_tensor_entry(Context& ctx, std::string_view name);
std::string wgmma_unavailable(Context& ctx);

// Runs `body` (which returns the entry) and records it, or records the error under `name`.
void record(ProbeResults& out, const std::string& name, const std::function<CeilingEntry()>& body);

}  // namespace aisp::probe
