// ch11:overlap — the contract of the copy/compute overlap ladder: y = p(x) for n fp32 values that start and
// end in pinned host memory, p the degree-`fmas` polynomial of reference.hpp (one FMA per degree).
//
// Every step moves the same bytes the same way: n x 4 bytes host -> device, one kernel, n x 4 bytes device
// -> host, with cudaMemcpyAsync from and to page-locked (pinned) buffers the problem owns. The ladder is
// about when those three things run, not how: serially, or cut into chunks on several streams so that chunk
// i's kernel runs while chunk i+1 is copied in and chunk i-1 is copied out.
//
// Bound: max(copy time, compute time). PCIe is full duplex and the GPU has separate copy engines for each
// direction, so the host -> device and device -> host copies can run at the same time; the floor is then
// one direction's n x 4 bytes at the measured pinned host -> device ceiling ("h2d_pinned" in aisp hw
// peaks), or the FLOPs at the FP32 FMA ceiling, whichever is longer. That is what work() declares (see
// there). The host-side cost of issuing the copies is outside the question (gpu clock: the launches are
// queued behind the harness's blocking kernel).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch11_streams/overlap/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch11::overlap {

// What every variant's launch receives. The device buffers are staging space the problem owns (the same
// for every step, so no step pays an allocation the other does not); the gate sees only the host buffers.
struct Args {
  const float* host_in;  // pinned, n values in [-1/2, 1/2)
  float* host_out;       // pinned, n values: the output
  float* dev_in;         // device, n values: where the input is copied to
  float* dev_out;        // device, n values: where the kernel writes
  std::size_t n;
  int fmas;    // fused multiply-adds per element (the polynomial's degree)
  int chunks;  // pieces the pipelined step cuts the buffer into (chunk_range in reference.hpp)
};

// The trusted device reference (device_reference.cu): p(x) per element straight from the pinned input,
// written to device memory.
void horner_on_device(const float* x, float* y, std::size_t n, int fmas, cudaStream_t stream);

class OverlapProblem final : public Problem<Args> {
 public:
  static constexpr std::int64_t k_max_fmas = std::int64_t{1} << 20;
  static constexpr std::int64_t k_max_chunks = std::int64_t{1} << 16;

  static TargetInfo target_info() {
    return {.chapter = "ch11",
            .ladder = "overlap",
            .summary = "pinned host -> device copy, kernel, device -> host copy; bound: max(PCIe copy time, "
                       "compute time)",
            .axes = {{.name = "n",
                      .default_value = std::int64_t{1} << 27,
                      .help = "fp32 elements sent to the GPU and back (default 2^27: 512 MiB each way)",
                      // Odd, so that the chunks of the test are uneven.
                      .test_value = (std::int64_t{1} << 16) + 3},
                     {.name = "fmas",
                      .default_value = 1024,
                      .help = "fused multiply-adds per element (2 FLOPs each): the compute against the copies",
                      .test_value = 64},
                     {.name = "chunks",
                      .default_value = 16,
                      .help = "pieces the pipelined step cuts the buffer into, round-robin over its 4 streams",
                      // More chunks than streams: the test reuses every stream.
                      .test_value = 6}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& /*device*/) override {
    if (axes.at("fmas") > k_max_fmas) {
      throw UsageError("ch11:overlap: fmas must be at most " + std::to_string(k_max_fmas));
    }
    if (axes.at("chunks") > k_max_chunks) {
      throw UsageError("ch11:overlap: chunks must be at most " + std::to_string(k_max_chunks));
    }
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_fmas = static_cast<int>(axes.at("fmas"));
    m_chunks = static_cast<int>(axes.at("chunks"));
    m_host_in = PinnedBuffer<float>(m_n);
    m_host_out = PinnedBuffer<float>(m_n);
    m_dev_in = DeviceBuffer<float>(m_n);
    m_dev_out = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
  }

  // The fill kernel writes the pinned input through its mapped address, then the reference kernel reads it
  // the same way: generate() costs two passes over PCIe, outside any timed interval.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -0.5, 0.5, stream);
    horner_on_device(m_host_in.data(), m_ref.data(), m_n, m_fmas, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_host_in.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_host_out.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"y_ref", m_ref.data(), m_n, DType::f32}}; }

  // Exact: every step and the reference evaluate the same fmas in the same order, each rounded once
  // (reference.hpp), so a right answer is the same bits. Any difference is a wrong chunk, a race between a
  // copy and the kernel that reads or writes its bytes, or a chunk never copied back.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // Bytes: one direction's n x 4 bytes, placed against the measured pinned host -> device ceiling. The
  // other direction's n x 4 bytes cross the link at the same time in the pipelined step (full duplex, one
  // copy engine per direction), so counting both against one direction's ceiling would put the physics
  // floor at twice what the hardware allows and call an honest overlap IMPLAUSIBLE; n x 4 bytes at the
  // h2d ceiling is a floor no schedule can beat, since all the input must cross in that direction.
  // FLOPs: 2 per fma, fp32. The floor is max(copy, compute), the ladder's bound.
  Work work() const override {
    return {.bytes = sizeof(float) * static_cast<double>(m_n),
            .flops = 2.0 * static_cast<double>(m_fmas) * static_cast<double>(m_n),
            .flop_dtype = "fp32",
            .ceiling = "h2d_pinned"};
  }

  Args args() const override {
    return {m_host_in.data(), m_host_out.data(), m_dev_in.data(), m_dev_out.data(), m_n, m_fmas, m_chunks};
  }

  bool has_host_reference() const override { return true; }
  // The input is host memory: read it directly once the stream is done with it.
  std::string check_reference_on_host(cudaStream_t stream) override {
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> want(m_n);
    for (std::size_t i = 0; i < m_n; ++i) want[i] = horner_geometric(m_host_in.data()[i], m_fmas);
    return compare_on_host("y_ref", to_host(references().front(), stream), want, tolerance());
  }

 private:
  std::size_t m_n = 0;
  int m_fmas = 0;
  int m_chunks = 0;
  PinnedBuffer<float> m_host_in;
  PinnedBuffer<float> m_host_out;
  DeviceBuffer<float> m_dev_in;
  DeviceBuffer<float> m_dev_out;
  DeviceBuffer<float> m_ref;
};

}  // namespace aisp::ch11::overlap
