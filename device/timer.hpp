// Takes one timed sample of a batch of launches, by the rules of docs/measurement.md "Timing".
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <utility>

#include "core/base/device_facts.hpp"
#include "core/base/registry.hpp"
#include "device/buffer.hpp"

namespace aisp {

class SampleTimer {
 public:
  // `flush`: how a cold sample evicts the L2 (core/base/registry.hpp L2Flush).
  SampleTimer(const DeviceFacts& device, cudaStream_t stream, ClockKind clock, CacheMode mode,
              L2Flush flush = L2Flush::read);
  ~SampleTimer();
  SampleTimer(const SampleTimer&) = delete;
  SampleTimer& operator=(const SampleTimer&) = delete;

  struct Sample {
    double seconds = 0;          // the whole timed interval (all `batch` launches)
    double host_launch_s = 0;    // host time spent inside the `batch` calls of `launch_once`
    bool blocked = false;        // queued behind the blocking kernel (host time then outside the interval)
    bool blocking_timed_out = false;
  };

  // One timed interval around `batch` calls of `launch_once`. For the gpu clock the launches are
  // queued behind a blocking kernel so that host launch cost stays out of the interval; set
  // `use_blocking_kernel` false for a variant whose launch synchronizes (it would deadlock against it).
  Sample time(const std::function<void()>& launch_once, int batch, bool use_blocking_kernel = true);

  // One launch for the audit: like time() with the blocking kernel, plus an end-marker kernel just before
  // the end event (CUPTI sees where the window closes), the host time spent inside `launch_once`, and how
  // long the device kept working after the end event completed. No L2 flush here: the caller flushes
  // before the recorder starts, so that the harness's own memset is not among the audited records.
  // A wall-clock timer audits the host's window instead (timer.cpp, docs/trust.md "Wall-clock targets").
  struct AuditSample {
    double host_launch_s = 0;
    double event_s = 0;
    double drain_s = 0;
    bool blocking_timed_out = false;
  };
  AuditSample time_for_audit(const std::function<void()>& launch_once);

  // Writes a buffer of twice the L2 size, so that the next sample starts from a cold L2. Enqueued on the
  // stream outside any timed interval.
  void flush_l2();

  // Runs `f` on the host before every sample that time() takes, after the L2 flush and outside the
  // timed interval: the ladder's own cold state (ProblemBase::prepare_sample). Empty: nothing.
  void set_before_sample(std::function<void()> f) { m_before_sample = std::move(f); }

  // Median of empty timed intervals (an event pair around nothing, same path as a sample): the smallest
  // difference this timer can resolve. Seconds.
  double measure_noise_floor(int repeats = 51);
  // Median time of one empty kernel launched and waited for, on this timer's clock: the least a single
  // launch that does anything on the GPU can take, and about the jitter of one wall-clock launch (the
  // host's wake-up after the synchronize). The fresh-input check's margin for wall-clock targets.
  double measure_roundtrip(int repeats = 51);

  // The largest batch the blocking kernel can hold: a deeper queue would block the launching thread.
  static constexpr int k_max_blocked_batch = 256;

 private:
  AuditSample time_for_audit_wall(const std::function<void()>& launch_once);

  cudaStream_t m_stream;
  ClockKind m_clock;
  CacheMode m_mode;
  cudaEvent_t m_start = nullptr;
  cudaEvent_t m_stop = nullptr;
  volatile int* m_flag = nullptr;      // host-mapped: the host releases the blocking kernel through it
  int* m_timed_out = nullptr;          // host-mapped: the blocking kernel reports a timeout through it
  DeviceBuffer<unsigned char> m_flush;
  unsigned char m_flush_value = 0;
  bool m_flush_by_reading = false;  // L2Flush::read, the default (see flush_l2)
  DeviceBuffer<unsigned> m_flush_sink;
  int m_sm_count = 0;
  std::function<void()> m_before_sample;
};

// Launches the spin kernel that holds the stream until *flag != 0 or timeout_ns passes (device side).
void launch_blocking_kernel(volatile int* flag, int* timed_out, unsigned long long timeout_ns,
                            cudaStream_t stream);
void launch_empty_kernel(cudaStream_t stream);
// Reads `bytes` of `buffer` (a multiple of 16) on the device: the read-only cold-L2 flush.
void launch_l2_flush_read(const void* buffer, std::size_t bytes, unsigned* sink, int sm_count,
                          cudaStream_t stream);
// A one-thread kernel whose name the audit looks for ("audit_end_marker") to find where a window closes.
void launch_audit_end_marker(cudaStream_t stream);
inline constexpr const char* k_blocking_kernel_name = "blocking_kernel";
inline constexpr const char* k_audit_marker_name = "audit_end_marker";

}  // namespace aisp
