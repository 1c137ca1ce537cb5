// ch04:overlap — a communication stream per rank beside its compute stream, and the events that order the
// two: what the overlapping steps (02 onwards) add to 01. Made in setup(), on each rank's GPU.
//
// Per rank r: the compute stream is RankStreams' (the harness stream for rank 0); the communication stream
// is this one. Within a launch:
//   fork(r)      the communication stream waits for the compute stream as it stands after RankStreams'
//                fork, so nothing it runs starts before the harness's start event;
//   ready(r, b)  recorded on the compute stream after the GEMM that completes bucket b, waited for by the
//                communication stream before bucket b's all-reduce (the steps make both calls);
//   join(r)      the compute stream waits for everything given to the communication stream, so the work
//                ends inside the harness's interval once RankStreams joins the compute streams.
// An event wait orders work on another stream without blocking the host or either stream's other work
// (CUDA C++ Programming Guide, "Events" and "Explicit Synchronization": cudaStreamWaitEvent); the events
// are made with cudaEventDisableTiming, the cheapest kind, since nothing here reads a time from them.
// A bucket gets its own event, so that no wait depends on which record of a reused event it sees.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "chapters/ch04_multi_gpu/common/rank_streams.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch04::overlap {

class CommStreams {
 public:
  CommStreams() = default;
  CommStreams(const CommStreams&) = delete;
  CommStreams& operator=(const CommStreams&) = delete;
  ~CommStreams() { release(); }

  // From setup(), with rank 0's GPU (devices[0]) current. `greatest_priority`: the streams get the greatest
  // priority their GPU offers (cudaDeviceGetStreamPriorityRange; CUDA C++ Programming Guide, "Stream
  // Priorities"), else the default one, the compute streams' priority.
  void create(std::span<const int> devices, std::size_t buckets, bool greatest_priority) {
    release();
    for (std::size_t r = 0; r < devices.size(); ++r) {
      on_device(devices[r], devices[0], [&] {
        int least = 0, greatest = 0;
        AISP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        AISP_CUDA_CHECK(
            cudaStreamCreateWithPriority(&m_stream[r], cudaStreamNonBlocking, greatest_priority ? greatest : 0));
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_start[r], cudaEventDisableTiming));
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_done[r], cudaEventDisableTiming));
        m_ready[r].assign(buckets, nullptr);
        for (auto& e : m_ready[r]) AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      });
    }
  }

  cudaStream_t stream(int r) const { return m_stream[r]; }
  cudaEvent_t ready(int r, std::size_t bucket) const { return m_ready[r][bucket]; }

  void fork(int r, cudaStream_t compute) {
    AISP_CUDA_CHECK(cudaEventRecord(m_start[r], compute));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(m_stream[r], m_start[r], 0));
  }
  void join(int r, cudaStream_t compute) {
    AISP_CUDA_CHECK(cudaEventRecord(m_done[r], m_stream[r]));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(compute, m_done[r], 0));
  }

 private:
  void release() {
    for (int r = 0; r < k_max_ranks; ++r) {
      for (cudaEvent_t e : m_ready[r]) {
        if (e) cudaEventDestroy(e);
      }
      m_ready[r].clear();
      if (m_start[r]) cudaEventDestroy(m_start[r]);
      if (m_done[r]) cudaEventDestroy(m_done[r]);
      if (m_stream[r]) cudaStreamDestroy(m_stream[r]);
      m_start[r] = m_done[r] = nullptr;
      m_stream[r] = nullptr;
    }
  }

  std::array<cudaStream_t, k_max_ranks> m_stream{};
  std::array<cudaEvent_t, k_max_ranks> m_start{}, m_done{};
  std::array<std::vector<cudaEvent_t>, k_max_ranks> m_ready{};
};

}  // namespace aisp::ch04::overlap
