// ch11:stream_ordered_alloc — the contract of the allocation ladder: one "step" that allocates two
// temporaries of n fp32 values, runs three small kernels through them (out = leaky_relu(1.5 x - 0.25) * x,
// one op per kernel; reference.hpp) and frees them, on every launch.
//
// The subject is what the allocation costs the host and the stream, not the kernels: every step runs the
// same three kernels on the same sizes and only changes how the temporaries are obtained and returned.
// cudaMalloc and cudaFree are host calls that synchronize the device (CUDA Programming Guide, "Stream-
// Ordered Memory Allocator": they "cause the GPU to synchronize across all executing CUDA streams"), so
// their cost is host time and lost queueing, which the GPU clock cannot see: this ladder is timed with the
// wall clock (launch + synchronize on the host, docs/measurement.md), and the allocation calls are inside
// the measured window on purpose. Default mode hot: launches back to back, as a program's loop runs its
// steps, so a step that does not synchronize lets the host queue the next one while the GPU works.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch11_streams/stream_ordered_alloc/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch11::stream_ordered_alloc {

// What every variant's launch receives. The temporaries are not here: obtaining them is the variant's job.
struct Args {
  const float* x;  // n values in [-1, 1)
  float* out;      // n values
  std::size_t n;   // elements per buffer (each temporary holds n floats)
  int device;      // the harness's GPU: where a memory pool must place its allocations
};

// The trusted device reference (device_reference.cu): the whole step fused into one kernel, no temporaries.
void step_on_device(const float* x, float* out, std::size_t n, cudaStream_t stream);

class StreamOrderedAllocProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch11",
            .ladder = "stream_ordered_alloc",
            .summary = "allocate two temporaries, three small kernels, free, per step; bound: host cost of "
                       "allocation (wall clock)",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 20,
                      .help = "fp32 elements per buffer (default 2^20: two 4 MiB temporaries per step)",
                      .test_value = (std::int64_t{1} << 12) + 3}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_x = DeviceBuffer<float>(m_n);
    m_out = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_device = device.index;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    step_on_device(m_x.data(), m_ref.data(), m_n, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"out_ref", m_ref.data(), m_n, DType::f32}}; }

  // Exact: every variant and the reference do the same three fp32 operations per element, each rounded
  // once (the affine map is an explicit fma, the slope a power of two), so a right answer is the same bits.
  // A mismatch is a kernel that read a temporary before it was written or after it was reused.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // What the three kernels move and compute, the same for every step: affine reads x and writes t1,
  // leaky_relu reads t1 and writes t2, gate reads t2 and x and writes out (16n bytes read, 12n written);
  // one fma (2 FLOPs), one multiply in leaky_relu (counted for every element), one in gate. At the default
  // size the buffers fit in L2 and the time is the host's, so % of ceiling is not this ladder's measure;
  // the wall time per step is.
  Work work() const override {
    const double n = static_cast<double>(m_n);
    return {.bytes = 28.0 * n, .flops = 4.0 * n, .bytes_read = 16.0 * n, .bytes_written = 12.0 * n,
            .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_out.data(), m_n, m_device}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> x = to_host(inputs().front(), stream);
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = step_reference(static_cast<float>(x[i]));
    return compare_on_host("out_ref", to_host(references().front(), stream), want, tolerance());
  }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  int m_device = 0;
};

}  // namespace aisp::ch11::stream_ordered_alloc
