#include "device/timer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/measure/stats.hpp"
#include "device/cuda_check.hpp"

namespace aisp {

namespace {
constexpr unsigned long long k_blocking_timeout_ns = 2'000'000'000ULL;  // 2 s
}

SampleTimer::SampleTimer(const DeviceFacts& device, cudaStream_t stream, ClockKind clock, CacheMode mode,
                         L2Flush flush)
    : m_stream(stream), m_clock(clock), m_mode(mode) {
  AISP_CUDA_CHECK(cudaEventCreate(&m_start));
  AISP_CUDA_CHECK(cudaEventCreate(&m_stop));
  void* p = nullptr;
  AISP_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  m_flag = static_cast<volatile int*>(p);
  m_timed_out = static_cast<int*>(p) + 1;
  // Twice the L2: every line of the previous sample's data is evicted (the L2 is not strictly LRU).
  if (m_mode == CacheMode::cold) m_flush = DeviceBuffer<unsigned char>(2 * device.l2_bytes);
  // The read flush (the default; see flush_l2) reads the buffer instead of writing it. The buffer is
  // filled once so that its reads return defined values.
  if (m_mode == CacheMode::cold && flush == L2Flush::read) {
    m_flush_by_reading = true;
    m_flush_sink = DeviceBuffer<unsigned>(1);
    m_sm_count = device.sm_count;
    AISP_CUDA_CHECK(cudaMemsetAsync(m_flush.data(), 0x5A, m_flush.bytes(), m_stream));
  }
}

SampleTimer::~SampleTimer() {
  if (m_flag) cudaFreeHost(const_cast<int*>(m_flag));
  if (m_start) cudaEventDestroy(m_start);
  if (m_stop) cudaEventDestroy(m_stop);
}

void SampleTimer::flush_l2() {
  if (m_flush.size() == 0) return;
  // The write flush leaves the L2 full of dirty lines, whose write-back then runs inside the next timed
  // interval and costs a short memory-bound kernel up to an L2's worth of DRAM writes; the read flush
  // leaves clean lines (and writes back the previous sample's dirty ones before the interval starts).
  if (m_flush_by_reading) {
    launch_l2_flush_read(m_flush.data(), m_flush.bytes() / 16 * 16, m_flush_sink.data(), m_sm_count, m_stream);
    return;
  }
  // A new value each time, so the writes can never be elided as redundant.
  AISP_CUDA_CHECK(cudaMemsetAsync(m_flush.data(), ++m_flush_value, m_flush.bytes(), m_stream));
}

SampleTimer::Sample SampleTimer::time(const std::function<void()>& launch_once, int batch,
                                      bool use_blocking_kernel) {
  Sample s;
  // The problem's preparation first (ch05 recomputes its reference on the device there), the L2 flush
  // last: nothing the harness or the problem runs may leave lines in the L2 of a cold sample.
  if (m_before_sample) m_before_sample();
  if (m_mode == CacheMode::cold) flush_l2();
  if (m_clock == ClockKind::wall) {
    AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) launch_once();
    AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    const auto t1 = std::chrono::steady_clock::now();
    s.seconds = std::chrono::duration<double>(t1 - t0).count();
    return s;
  }
  const bool blocking = use_blocking_kernel && batch <= k_max_blocked_batch;
  s.blocked = blocking;
  if (blocking) {
    *m_flag = 0;
    *m_timed_out = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    launch_blocking_kernel(m_flag, m_timed_out, k_blocking_timeout_ns, m_stream);
  }
  AISP_CUDA_CHECK(cudaEventRecord(m_start, m_stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batch; ++i) launch_once();
  s.host_launch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AISP_CUDA_CHECK(cudaEventRecord(m_stop, m_stream));
  if (blocking) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *m_flag = 1;
  }
  AISP_CUDA_CHECK(cudaEventSynchronize(m_stop));
  float ms = 0;
  AISP_CUDA_CHECK(cudaEventElapsedTime(&ms, m_start, m_stop));
  s.seconds = static_cast<double>(ms) * 1e-3;
  s.blocking_timed_out = blocking && *m_timed_out != 0;
  return s;
}

SampleTimer::AuditSample SampleTimer::time_for_audit(const std::function<void()>& launch_once) {
  using clock = std::chrono::steady_clock;
  AuditSample a;
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  if (m_clock == ClockKind::wall) return time_for_audit_wall(launch_once);
  *m_flag = 0;
  *m_timed_out = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  launch_blocking_kernel(m_flag, m_timed_out, k_blocking_timeout_ns, m_stream);
  AISP_CUDA_CHECK(cudaEventRecord(m_start, m_stream));
  const auto t0 = clock::now();
  launch_once();
  const auto t1 = clock::now();
  launch_audit_end_marker(m_stream);
  AISP_CUDA_CHECK(cudaEventRecord(m_stop, m_stream));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *m_flag = 1;
  AISP_CUDA_CHECK(cudaEventSynchronize(m_stop));
  const auto t2 = clock::now();
  // Everything the variant started must be finished by now; whatever still runs escaped the window.
  AISP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t3 = clock::now();
  float ms = 0;
  AISP_CUDA_CHECK(cudaEventElapsedTime(&ms, m_start, m_stop));
  a.host_launch_s = std::chrono::duration<double>(t1 - t0).count();
  a.event_s = static_cast<double>(ms) * 1e-3;
  a.drain_s = std::chrono::duration<double>(t3 - t2).count();
  a.blocking_timed_out = *m_timed_out != 0;
  return a;
}

// The wall clock's window is the host's: from before launch() to after the stream is synchronized. A
// launch timed that way may wait on its own work (a serving step reads tokens back; a host loop syncs),
// so the blocking kernel cannot hold the stream: it opens the window already released, and returns before
// launch() starts. The records then say whether every kernel and copy ran between that opening record
// and the end marker enqueued after the synchronize, on whichever stream (docs/trust.md "Wall-clock
// targets"): work left running after the clock stopped is an escape, whatever stream it is on.
SampleTimer::AuditSample SampleTimer::time_for_audit_wall(const std::function<void()>& launch_once) {
  using clock = std::chrono::steady_clock;
  AuditSample a;
  *m_flag = 1;
  *m_timed_out = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  launch_blocking_kernel(m_flag, m_timed_out, k_blocking_timeout_ns, m_stream);
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  const auto t0 = clock::now();
  launch_once();
  const auto t1 = clock::now();
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  const auto t2 = clock::now();
  launch_audit_end_marker(m_stream);
  AISP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t3 = clock::now();
  a.host_launch_s = std::chrono::duration<double>(t1 - t0).count();
  a.event_s = std::chrono::duration<double>(t2 - t0).count();  // the interval the wall clock measures
  a.drain_s = std::chrono::duration<double>(t3 - t2).count();  // the end marker's own ~10 us included
  return a;
}

double SampleTimer::measure_noise_floor(int repeats) {
  std::vector<double> samples;
  const auto nothing = [] {};
  for (int i = 0; i < repeats + 5; ++i) {
    const Sample s = time(nothing, 1);
    if (i >= 5) samples.push_back(s.seconds);  // the first few include lazy set-up
  }
  return stats::median(samples);
}

double SampleTimer::measure_roundtrip(int repeats) {
  std::vector<double> samples;
  for (int i = 0; i < repeats + 5; ++i) {
    const Sample s = time([this] { launch_empty_kernel(m_stream); }, 1);
    if (i >= 5) samples.push_back(s.seconds);
  }
  return stats::median(samples);
}

}  // namespace aisp
