// ch04 — one process driving several GPUs: switching the current GPU for a rank's calls, peer access
// between every pair of ranks, and the per-rank streams a step forks to from the harness stream and joins
// back. Shared by ch04:collectives (ch04:allreduce's problem.hpp holds the same code, written first).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <span>
#include <stdexcept>
#include <string>

#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "device/cuda_check.hpp"
#include "device/peer_access.hpp"

namespace aisp::ch04 {

// Runs `fn` with `device` current, then makes `previous` current again (the harness's GPU).
template <class Fn>
void on_device(int device, int previous, Fn&& fn) {
  AISP_CUDA_CHECK(cudaSetDevice(device));
  fn();
  AISP_CUDA_CHECK(cudaSetDevice(previous));
}

// Peer access from every rank's GPU to every other's (devices[0] is the current GPU, the harness's):
// copies and kernels on one rank reach another's buffers, and the gate on rank 0 reads every rank's
// output (CUDA C++ Programming Guide, "Peer-to-Peer Memory Access"). Ranks sharing a GPU (the GPU tests)
// need nothing. Throws when a pair has no peer path: these ladders measure the direct one.
inline void enable_peer_access_among(std::span<const int> devices) {
  for (const int from : devices) {
    for (const int to : devices) {
      if (to == from) continue;
      bool ok = true;
      on_device(from, devices[0], [&] { ok = enable_peer_access(to); });
      if (!ok) {
        throw std::runtime_error("GPU " + std::to_string(from) + " cannot access GPU " + std::to_string(to) +
                                 "'s memory (no peer path): this ladder needs one");
      }
    }
  }
}

// The per-rank streams and fork/join events a step needs: rank 0 runs on the harness stream, the others
// on streams of their own GPUs, which wait for the harness stream at the start of a launch and which the
// harness stream waits for at its end (CUDA C++ Programming Guide, "Stream synchronization": an event
// recorded on one GPU's stream may be waited for by another GPU's stream). The harness's events then
// time the slowest rank, as nccl-tests reports a collective's time.
class RankStreams {
 public:
  RankStreams() = default;
  RankStreams(const RankStreams&) = delete;
  RankStreams& operator=(const RankStreams&) = delete;
  ~RankStreams() { release(); }

  // Called from setup(), with rank 0's GPU (devices[0], the harness's) current.
  void create(std::span<const int> devices) {
    release();
    m_ranks = static_cast<int>(devices.size());
    for (int r = 1; r < m_ranks; ++r) {
      on_device(devices[r], devices[0], [&] {
        AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream[r], cudaStreamNonBlocking));
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_done[r], cudaEventDisableTiming));
      });
    }
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_fork, cudaEventDisableTiming));
  }

  // Rank r's stream for this launch (rank 0: the harness stream).
  cudaStream_t stream(int r, cudaStream_t harness) const { return r == 0 ? harness : m_stream[r]; }

  void fork(cudaStream_t harness) {
    AISP_CUDA_CHECK(cudaEventRecord(m_fork, harness));
    for (int r = 1; r < m_ranks; ++r) AISP_CUDA_CHECK(cudaStreamWaitEvent(m_stream[r], m_fork, 0));
  }
  void join(cudaStream_t harness) {
    for (int r = 1; r < m_ranks; ++r) {
      AISP_CUDA_CHECK(cudaEventRecord(m_done[r], m_stream[r]));
      AISP_CUDA_CHECK(cudaStreamWaitEvent(harness, m_done[r], 0));
    }
  }

 private:
  void release() {
    for (int r = 0; r < k_max_ranks; ++r) {
      if (m_stream[r]) cudaStreamDestroy(m_stream[r]);
      if (m_done[r]) cudaEventDestroy(m_done[r]);
      m_stream[r] = nullptr;
      m_done[r] = nullptr;
    }
    if (m_fork) cudaEventDestroy(m_fork);
    m_fork = nullptr;
  }

  int m_ranks = 0;
  std::array<cudaStream_t, k_max_ranks> m_stream{};  // [0] unused: rank 0 is the harness stream
  std::array<cudaEvent_t, k_max_ranks> m_done{};
  cudaEvent_t m_fork = nullptr;
};

}  // namespace aisp::ch04
