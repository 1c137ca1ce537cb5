// ch04:allreduce — the contract of the all-reduce ladder: R GPUs (ranks) each hold n fp32 values; after
// the launch every rank's output holds the elementwise sum over all ranks' inputs.
//
// One process drives every rank (the GPUs of this host visible to it; the `ranks` axis takes the first
// few, counted from the harness's GPU): rank 0 is the harness's GPU and its stream, rank r the GPU r
// places after it. A step forks from the harness stream to one stream per rank and joins back, so the
// harness's events time the slowest rank, as nccl-tests reports a collective's time. Every rank's output
// is checked: the gate's kernels run on rank 0's GPU and read the other ranks' buffers over peer access.
//
// Bandwidth as nccl-tests defines it (common/bus_bandwidth.hpp): the declared bytes are the bus bytes,
// 4 n x 2 (R - 1) / R, so the throughput column is the bus bandwidth ("busbw"), placed against the
// measured GPU<->GPU ceiling of the pair rank 1 -> rank 0 (aisp hw peaks, "p2p_<1>_to_<0>_peer"): the
// rate one link carries in one direction, which an all-reduce on a ring keeps busy both ways. The
// algorithm bandwidth (algbw) is 4 n / median time. Needs two GPUs: every variant declares the multi_gpu
// feature and is SKIPPED on one, and all_gpus (its work runs on every rank's GPU, which the audit then
// accepts).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/allreduce/reference.hpp"
#include "chapters/ch04_multi_gpu/allreduce/ring.hpp"
#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/rank_streams.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/common/wave_grid.hpp"
#include "core/base/error.hpp"
#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch04::allreduce {

struct Args {
  std::size_t n = 0;
  int ranks = 0;
  std::array<int, k_max_ranks> device{};        // rank r's GPU; device[0] is the harness's
  std::array<const float*, k_max_ranks> in{};   // rank r's input, on device[r]
  std::array<float*, k_max_ranks> out{};        // rank r's output, on device[r]
  int sm_count = 0;                             // of rank 0's GPU (one kind of GPU per host)
  int max_threads_per_sm = 0;

  std::span<const int> devices() const { return {device.data(), static_cast<std::size_t>(ranks)}; }
};

// The trusted reference (device_reference.cu): one kernel on rank 0's GPU reads every input over peer
// access and adds them in rank order, as host_allreduce does.
void launch_reference(const Args& a, float* ref, cudaStream_t stream);

class AllreduceProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch04",
            .ladder = "allreduce",
            .summary = "sum n fp32 values over every GPU, the result on every GPU; bound: the measured GPU<->GPU "
                       "bandwidth, as nccl-tests' bus bandwidth",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements per rank (4 bytes each; default 2^28 = 1 GiB, swept 4 KiB to 1 GiB)",
                      .test_value = (std::int64_t{1} << 16) + 3,
                      .default_sweep = {std::int64_t{1} << 10, std::int64_t{1} << 16, std::int64_t{1} << 20,
                                        std::int64_t{1} << 24, std::int64_t{1} << 28}},
                     ranks_axis()},
            .clock = ClockKind::gpu,
            .default_mode = k_ranks_mode};  // common/ranks.hpp: why hot
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    allocate_ranks(static_cast<std::size_t>(axes.at("n")),
                   rank_devices(axes.at("ranks"), device.device_count, device.index, "ch04:allreduce"), device);
  }

  // The buffers of ranks on `devices` (devices[0] is the harness's and the current GPU). allocate() passes
  // distinct GPUs; the GPU tests also pass one GPU several times (ranks sharing it: the steps' schedule,
  // kernels and streams checked on a one-GPU machine; NCCL refuses that, and the harness never does it).
  void allocate_ranks(std::size_t n, const std::vector<int>& devices, const DeviceFacts& device) {
    m_n = n;
    m_ranks = static_cast<int>(devices.size());
    if (m_ranks < 1 || m_ranks > k_max_ranks) {
      throw UsageError("ch04:allreduce: at most " + std::to_string(k_max_ranks) + " ranks (one NVLink domain)");
    }
    for (int r = 0; r < m_ranks; ++r) m_device[r] = devices[r];
    // Every pair: a ring step reads its left neighbour, the gate (on rank 0) reads every rank. With one
    // GPU the variants are SKIPPED; the buffers still exist so that the harness's pass runs.
    enable_peer_access_among(std::span<const int>(m_device.data(), static_cast<std::size_t>(m_ranks)));
    m_in.clear();
    m_out.clear();
    m_ref.clear();
    for (int r = 0; r < m_ranks; ++r) {
      on_device(m_device[r], m_device[0], [&] {
        m_in.emplace_back(m_n);
        m_out.emplace_back(m_n);
      });
      // One reference per output (the harness masks each in place), all on rank 0's GPU beside the gate.
      m_ref.emplace_back(m_n);
    }
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto ins = inputs();
    // A different stream of values per rank: the seed mixed with the rank.
    for (int r = 0; r < m_ranks; ++r) fill_uniform(ins[r], seed * k_max_ranks + r, -1.0, 1.0, stream);
    launch_reference(args(), m_ref[0].data(), stream);
    for (int r = 1; r < m_ranks; ++r) {
      AISP_CUDA_CHECK(cudaMemcpyAsync(m_ref[r].data(), m_ref[0].data(), m_n * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
    }
  }

  std::vector<TensorView> inputs() const override { return views("in", m_in); }
  std::vector<TensorView> outputs() const override { return views("out", m_out); }
  std::vector<TensorView> references() const override { return views("ref", m_ref); }
  Tolerance tolerance() const override { return {allreduce_atol(m_ranks), 0.0}; }

  // nccl-tests' bus bytes (header comment), against the link of the pair rank 1 -> rank 0.
  Work work() const override {
    const double size = sizeof(float) * static_cast<double>(m_n);
    return {.bytes = bus_bytes(Collective::all_reduce, m_ranks, size),
            .ceiling = m_ranks > 1 ? p2p_ceiling_name(m_device[1], m_device[0], true) : "p2p"};
  }

  Args args() const override {
    Args a{.n = m_n, .ranks = m_ranks, .sm_count = m_sm_count, .max_threads_per_sm = m_max_threads_per_sm};
    for (int r = 0; r < m_ranks; ++r) {
      a.device[r] = m_device[r];
      a.in[r] = m_in[r].data();
      a.out[r] = m_out[r].data();
    }
    return a;
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    std::vector<std::vector<float>> in;
    for (const auto& v : inputs()) {
      const auto values = to_host(v, stream);
      in.emplace_back(values.begin(), values.end());
    }
    const auto want = host_allreduce(in);
    return compare_on_host("ref", to_host(references()[0], stream), std::vector<double>(want.begin(), want.end()),
                           {0.0, 0.0});
  }

 private:
  static std::vector<TensorView> views(const std::string& name, const std::vector<DeviceBuffer<float>>& buffers) {
    std::vector<TensorView> v;
    for (std::size_t r = 0; r < buffers.size(); ++r) {
      v.push_back({name + std::to_string(r), buffers[r].data(), buffers[r].size(), DType::f32});
    }
    return v;
  }

  std::size_t m_n = 0;
  int m_ranks = 1;
  std::array<int, k_max_ranks> m_device{};
  std::vector<DeviceBuffer<float>> m_in, m_out, m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};


}  // namespace aisp::ch04::allreduce
