// ch04:collectives — the contract of the collectives ladder: the collectives other than all-reduce
// (all-gather, reduce-scatter, broadcast, all-to-all, send/recv; axis `op`) over R GPUs (ranks) on fp32
// data, measured as nccl-tests measures them, so that `aisp bench run -t ch04:collectives` replaces an
// nccl-tests run of all_gather_perf, reduce_scatter_perf, broadcast_perf, alltoall_perf and sendrecv_perf.
//
// One process drives every rank, as in ch04:allreduce: rank r on GPU (harness GPU + r) % visible; a step
// forks from the harness stream to one stream per rank and joins back (common/rank_streams.hpp), so the
// harness's events time the slowest rank. Every rank's output is checked: the gate's kernels run on rank
// 0's GPU and read the other ranks' buffers over peer access, against one reference per rank computed
// there by device_reference.cu.
//
// What each op moves and the buffer sizes: layout.hpp. The `n` axis is nccl-tests' size per op (the
// gathered buffer for all-gather, the send buffer for reduce-scatter, one rank's buffer for all-to-all,
// the buffer for broadcast and send/recv), rounded as nccl-tests rounds it (make_layout).
//
// Bandwidth as nccl-tests defines it (common/bus_bandwidth.hpp): the declared bytes are the bus bytes,
// S x factor(op, R), so the throughput column is the bus bandwidth ("busbw"), placed against the measured
// GPU<->GPU ceiling of the pair rank 1 -> rank 0 (aisp hw peaks, "p2p_<1>_to_<0>_peer"): one direction of
// one link. Needs two GPUs: every variant declares the multi_gpu feature and is SKIPPED on one, and
// all_gpus (its work runs on every rank's GPU, which the audit then accepts).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/collectives/layout.hpp"
#include "chapters/ch04_multi_gpu/collectives/reference.hpp"
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

namespace aisp::ch04::collectives {

struct Args {
  Layout layout;                                // op, ranks, chunk and buffer sizes
  std::array<int, k_max_ranks> device{};        // rank r's GPU; device[0] is the harness's
  std::array<const float*, k_max_ranks> in{};   // rank r's input (layout.in_count), on device[r]
  std::array<float*, k_max_ranks> out{};        // rank r's output (layout.out_count), on device[r]
  int sm_count = 0;                             // of rank 0's GPU (one kind of GPU per host)
  int max_threads_per_sm = 0;

  int ranks() const { return layout.ranks; }
  std::span<const int> devices() const { return {device.data(), static_cast<std::size_t>(layout.ranks)}; }
};

// The trusted reference (device_reference.cu): one kernel on rank 0's GPU computes rank `rank`'s output
// element by element from every rank's input (read over peer access), as reference.hpp defines it.
void launch_reference(const Args& a, int rank, float* ref, cudaStream_t stream);

class CollectivesProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch04",
            .ladder = "collectives",
            .summary = "all-gather, reduce-scatter, broadcast, all-to-all and send/recv of fp32 over every GPU "
                       "(axis op); bound: the measured GPU<->GPU bandwidth, as nccl-tests' bus bandwidth",
            .axes = {{.name = "op", .default_value = 0, .help = k_op_help, .min_value = 0,
                      .default_sweep = {0, 1, 2, 3, 4}},
                     {.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "nccl-tests' size in fp32 elements (4 bytes each): the gathered buffer (all-gather), "
                              "the send buffer (reduce-scatter), one rank's buffer (all-to-all), the buffer "
                              "(broadcast, send/recv); default 2^28 = 1 GiB, swept 4 KiB to 1 GiB",
                      .test_value = (std::int64_t{1} << 16) + 3,
                      .default_sweep = {std::int64_t{1} << 10, std::int64_t{1} << 16, std::int64_t{1} << 22,
                                        std::int64_t{1} << 28}},
                     ranks_axis()},
            .clock = ClockKind::gpu,
            .default_mode = k_ranks_mode};  // common/ranks.hpp: why hot
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const Collective op = op_from_axis(axes.at("op"));
    const auto devices = rank_devices(axes.at("ranks"), device.device_count, device.index, "ch04:collectives");
    allocate_ranks(op, static_cast<std::size_t>(axes.at("n")), devices, device);
  }

  // The buffers of ranks on `devices` (devices[0] is the harness's and the current GPU). allocate() passes
  // distinct GPUs; the GPU tests also pass one GPU several times (ranks sharing it: step 01's copies,
  // staging and streams checked on a one-GPU machine; NCCL refuses that, and the harness never does it).
  void allocate_ranks(Collective op, std::size_t n, const std::vector<int>& devices, const DeviceFacts& device) {
    const int ranks = static_cast<int>(devices.size());
    if (ranks < 1 || ranks > k_max_ranks) {
      throw UsageError("ch04:collectives: 1 to " + std::to_string(k_max_ranks) + " ranks (one NVLink domain)");
    }
    m_layout = make_layout(op, ranks, n);
    std::copy(devices.begin(), devices.end(), m_device.begin());
    // Every pair: a step's rank reads any other's input, the gate (on rank 0) reads every rank. With one
    // GPU the variants are SKIPPED; the buffers still exist so that the harness's pass runs.
    enable_peer_access_among(devices);
    m_in.clear();
    m_out.clear();
    m_ref.clear();
    for (int r = 0; r < ranks; ++r) {
      // Broadcast reads only the root's input; the others exist as nccl-tests allocates them (uniform
      // buffers, every one filled and hashed by the gate).
      on_device(m_device[r], m_device[0], [&] {
        m_in.emplace_back(m_layout.in_count);
        m_out.emplace_back(m_layout.out_count);
      });
      m_ref.emplace_back(m_layout.out_count);  // on rank 0's GPU beside the gate; the harness masks each
    }
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto ins = inputs();
    // A different stream of values per rank: the seed mixed with the rank.
    for (int r = 0; r < m_layout.ranks; ++r) fill_uniform(ins[r], seed * k_max_ranks + r, -1.0, 1.0, stream);
    const Args a = args();
    for (int r = 0; r < m_layout.ranks; ++r) launch_reference(a, r, m_ref[r].data(), stream);
  }

  std::vector<TensorView> inputs() const override { return views("in", m_in); }
  std::vector<TensorView> outputs() const override { return views("out", m_out); }
  std::vector<TensorView> references() const override { return views("ref", m_ref); }
  Tolerance tolerance() const override { return {collective_atol(m_layout.op, m_layout.ranks), 0.0}; }

  // nccl-tests' bus bytes (header comment), against the link of the pair rank 1 -> rank 0.
  Work work() const override {
    const int ranks = m_layout.ranks;
    return {.bytes = bus_bytes(m_layout.op, ranks, m_layout.size_bytes()),
            .ceiling = ranks > 1 ? p2p_ceiling_name(m_device[1], m_device[0], true) : "p2p"};
  }

  Args args() const override {
    Args a{.layout = m_layout, .sm_count = m_sm_count, .max_threads_per_sm = m_max_threads_per_sm};
    for (int r = 0; r < m_layout.ranks; ++r) {
      a.device[r] = m_device[r];
      a.in[r] = m_in[r].data();
      a.out[r] = m_out[r].data();
    }
    return a;
  }

  // Every rank's reference against the host's (exact: the kernel adds reduce-scatter's terms in rank order,
  // as host_reduce_scatter does, and moves the other ops' elements unchanged).
  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    Buffers in;
    for (const auto& v : inputs()) {
      const auto values = to_host(v, stream);
      in.emplace_back(values.begin(), values.end());
    }
    const Buffers want = host_collective(m_layout.op, in);
    const auto refs = references();
    for (int r = 0; r < m_layout.ranks; ++r) {
      const auto& w = want[r];
      std::string diff = compare_on_host(refs[r].name, to_host(refs[r], stream),
                                         std::vector<double>(w.begin(), w.end()), {0.0, 0.0});
      if (!diff.empty()) return diff;
    }
    return {};
  }

 private:
  static std::vector<TensorView> views(const std::string& name, const std::vector<DeviceBuffer<float>>& buffers) {
    std::vector<TensorView> v;
    for (std::size_t r = 0; r < buffers.size(); ++r) {
      v.push_back({name + std::to_string(r), buffers[r].data(), buffers[r].size(), DType::f32});
    }
    return v;
  }

  Layout m_layout;
  std::array<int, k_max_ranks> m_device{};
  std::vector<DeviceBuffer<float>> m_in, m_out, m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch04::collectives
