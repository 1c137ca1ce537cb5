// ch02:p2p_copy — the contract of the GPU-to-GPU copy ladder: dst[i] = src[i] for n fp32 elements, where
// src lives on the next GPU (the peer) and dst on this one.
//
// Ladder of the paths data can take between two GPUs of one host: through host memory, the driver's direct
// copy, and this GPU's SMs reading the peer's memory. Its bound is the link: n * 4 bytes must cross from the
// peer to this GPU, placed against the measured GPU<->GPU ceiling of this pair (aisp hw peaks, the
// "p2p_<peer>_to_<this>_peer" entry). Needs two GPUs: every variant declares the multi_gpu feature and is
// SKIPPED on one.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"
#include "device/peer_access.hpp"

namespace aisp::ch02::p2p_copy {

struct Args {
  const float* src;  // on GPU `peer`
  float* dst;        // on GPU `device` (the harness's)
  std::size_t n;
  int device;
  int peer;
  int sm_count;      // of `device`: launch geometry from the device, never a literal
  int max_threads_per_sm;
};

class P2pCopyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch02",
            .ladder = "p2p_copy",
            .summary = "copy n fp32 elements from the next GPU into this one; bound: the measured GPU<->GPU "
                       "bandwidth",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements copied (4 bytes each; default 2^28 = 1 GiB)",
                      .test_value = (std::int64_t{1} << 20) + 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_device = device.index;
    // With one GPU the variants are SKIPPED; the buffers still exist so that the harness's pass runs.
    m_peer = device.device_count >= 2 ? (device.index + 1) % device.device_count : device.index;
    if (m_peer != m_device) {
      // The gate (fill, compare, hash) runs on this GPU and reads the source where it lives.
      if (!enable_peer_access(m_peer)) {
        throw std::runtime_error("GPU " + std::to_string(m_device) + " cannot access GPU " +
                                 std::to_string(m_peer) + "'s memory (no peer path): this ladder needs one");
      }
      AISP_CUDA_CHECK(cudaSetDevice(m_peer));
      m_src = DeviceBuffer<float>(m_n);
      AISP_CUDA_CHECK(cudaSetDevice(m_device));
    } else {
      m_src = DeviceBuffer<float>(m_n);
    }
    m_dst = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"src", m_src.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"dst", m_dst.data(), m_n, DType::f32}}; }
  // A copy's reference is its input.
  std::vector<TensorView> references() const override { return inputs(); }
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // The bytes cross the link once; placed against the pair's measured peer-access ceiling, not DRAM.
  Work work() const override {
    return {.bytes = sizeof(float) * static_cast<double>(m_n),
            .ceiling = m_peer != m_device ? p2p_ceiling_name(m_peer, m_device, true) : "p2p"};
  }

  Args args() const override {
    return {m_src.data(), m_dst.data(), m_n, m_device, m_peer, m_sm_count, m_max_threads_per_sm};
  }

 private:
  std::size_t m_n = 0;
  int m_device = 0, m_peer = 0;
  DeviceBuffer<float> m_src;
  DeviceBuffer<float> m_dst;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of 256-thread blocks, as in ch07:copy.
inline int full_wave_blocks(const Args& a, int threads) { return a.sm_count * (a.max_threads_per_sm / threads); }

}  // namespace aisp::ch02::p2p_copy
