// ch04 — a communication stream per rank beside its compute stream, and the events that order the two:
// what a step that overlaps collectives with compute adds to RankStreams (rank_streams.hpp). Used by
// ch04:overlap (one event per bucket) and ch04:tensor_parallel_gemm (per chunk).
//
// Per rank r: the compute stream is RankStreams' (the harness stream for rank 0); the communication stream
// is this one. Within a launch:
//   fork(r)        the communication stream waits for the compute stream as it stands after RankStreams'
//                  fork, so nothing it runs starts before the harness's start event;
//   record(r, i, from), wait(r, i, to)
//                  event i recorded on `from`, waited for by `to`: `to`'s later work starts only when the
//                  work `from` held at the record is done (either direction: compute -> communication when
//                  a GEMM's output is ready to send, communication -> compute when received data is ready).
//                  Record right after the work it stands for: whatever `from` is given before the record
//                  is waited for too;
//   handoff(r, i, from, to)
//                  both at once, for a wait that follows its record directly;
//   join(r)        the compute stream waits for everything given to the communication stream, so the work
//                  ends inside the harness's interval once RankStreams joins the compute streams.
// An event wait orders work on another stream without blocking the host or either stream's other work
// (CUDA C++ Programming Guide, "Events" and "Explicit Synchronization": cudaStreamWaitEvent, which waits for
// the event's most recent record at the time of the call); the events are made with cudaEventDisableTiming,
// the cheapest kind, since nothing here reads a time from them. Each hand-off of a launch gets its own
// event, so that no wait depends on which record of a reused event it sees.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "chapters/ch04_multi_gpu/common/rank_streams.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch04 {

class CommStreams {
 public:
  CommStreams() = default;
  CommStreams(const CommStreams&) = delete;
  CommStreams& operator=(const CommStreams&) = delete;
  ~CommStreams() { release(); }

  // From setup(), with rank 0's GPU (devices[0]) current: a stream and `events` hand-off events per rank.
  // `greatest_priority`: the streams get the greatest priority their GPU offers
  // (cudaDeviceGetStreamPriorityRange; CUDA C++ Programming Guide, "Stream Priorities"), else the default
  // one, the compute streams' priority.
  void create(std::span<const int> devices, std::size_t events, bool greatest_priority = false) {
    release();
    for (std::size_t r = 0; r < devices.size(); ++r) {
      on_device(devices[r], devices[0], [&] {
        int least = 0, greatest = 0;
        AISP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        AISP_CUDA_CHECK(
            cudaStreamCreateWithPriority(&m_stream[r], cudaStreamNonBlocking, greatest_priority ? greatest : 0));
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_start[r], cudaEventDisableTiming));
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_done[r], cudaEventDisableTiming));
        m_event[r].assign(events, nullptr);
        for (auto& e : m_event[r]) AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      });
    }
  }

  cudaStream_t stream(int r) const { return m_stream[r]; }
  cudaEvent_t event(int r, std::size_t i) const { return m_event[r][i]; }

  void fork(int r, cudaStream_t compute) {
    AISP_CUDA_CHECK(cudaEventRecord(m_start[r], compute));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(m_stream[r], m_start[r], 0));
  }
  void record(int r, std::size_t i, cudaStream_t from) { AISP_CUDA_CHECK(cudaEventRecord(m_event[r][i], from)); }
  void wait(int r, std::size_t i, cudaStream_t to) { AISP_CUDA_CHECK(cudaStreamWaitEvent(to, m_event[r][i], 0)); }
  void handoff(int r, std::size_t i, cudaStream_t from, cudaStream_t to) {
    record(r, i, from);
    wait(r, i, to);
  }
  void join(int r, cudaStream_t compute) {
    AISP_CUDA_CHECK(cudaEventRecord(m_done[r], m_stream[r]));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(compute, m_done[r], 0));
  }

 private:
  void release() {
    for (int r = 0; r < k_max_ranks; ++r) {
      for (cudaEvent_t e : m_event[r]) {
        if (e) cudaEventDestroy(e);
      }
      m_event[r].clear();
      if (m_start[r]) cudaEventDestroy(m_start[r]);
      if (m_done[r]) cudaEventDestroy(m_done[r]);
      if (m_stream[r]) cudaStreamDestroy(m_stream[r]);
      m_start[r] = m_done[r] = nullptr;
      m_stream[r] = nullptr;
    }
  }

  std::array<cudaStream_t, k_max_ranks> m_stream{};
  std::array<cudaEvent_t, k_max_ranks> m_start{}, m_done{};
  std::array<std::vector<cudaEvent_t>, k_max_ranks> m_event{};
};

}  // namespace aisp::ch04
