// ch10:cluster_softmax — the contract of the second cluster ladder: y[r][c] = exp(x[r][c] - max_r) / sum_r
// per row, on bf16 rows with fp32 arithmetic inside (ch08:softmax's problem), for rows too long for one
// block to hold: a vocabulary's logits (Llama-3's 128,256 by default) for a batch of tokens being
// sampled.
//
// A row needs its max and its sum of exponentials before the first output can be written. ch08:softmax
// keeps a row of 8,192 in one block's registers and reads it once. A 128K row does not fit one block
// well, and a batch of a few rows gives one block per row too few SMs to read at the DRAM rate. Splitting
// a row over blocks gives the parallelism back, but then the blocks must agree on the row's max and sum:
// through global memory and a second kernel (which reads the row again), or, in a thread block cluster,
// through distributed shared memory while each block still holds its chunk (one read). Where each wins
// depends on the number of rows (the default sweep): that is the README's table.
//
// Bound: the DRAM copy ceiling. Minimum traffic: each input read once, each output written once, 2 bytes
// each: 4 * rows * cols bytes; 16.4 MB at 32 x 128256.
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "chapters/ch08_occupancy_pipelines/softmax/online.cuh"
#include "chapters/ch10_tensor_cores/cluster_softmax/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch10::cluster_softmax {

// What every variant's launch receives. `partials` is scratch for step 02 (rows x k_chunks float2),
// garbage on entry.
struct Args {
  const __nv_bfloat16* x;  // rows x cols, row-major
  __nv_bfloat16* y;        // rows x cols, row-major
  float2* partials;        // rows x k_chunks: step 02's (max, sum) per chunk
  int rows;
  int cols;                // a multiple of 8 (16-byte rows), at most k_max_cols
};

// The trusted path (problem.cu): one block per row, fp64 arithmetic, accurate exp. Writes ref.
void launch_reference(const __nv_bfloat16* x, __nv_bfloat16* ref, int rows, int cols, cudaStream_t stream);

class ClusterSoftmaxProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch10",
            .ladder = "cluster_softmax",
            .summary = "softmax of long bf16 rows (a vocabulary): a block per row, a row split over blocks, a "
                       "row held by a cluster; bound: DRAM copy",
            .axes = {{.name = "rows", .default_value = 32,
                      .help = "rows (tokens whose logits are normalized)", .min_value = 1,
                      // Odd, so that no grid divides it evenly.
                      .test_value = 5,
                      // From fewer rows than a GPU has SMs / 8 to several waves of clusters.
                      .default_sweep = {8, 32, 128, 512}},
                     {.name = "cols", .default_value = 128256,
                      .help = "bf16 elements per row (the vocabulary); a multiple of 8, at most 2^18",
                      .min_value = 8,
                      // 1000 vectors: chunks of 125, fewer than a block's threads, and an uneven last one.
                      .test_value = 8000}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_rows = static_cast<int>(axes.at("rows"));
    m_cols = static_cast<int>(axes.at("cols"));
    if (m_rows > 65535) {  // steps 02 and 03 put rows on gridDim.y
      throw UsageError("ch10:cluster_softmax: rows must be at most 65535, got " + std::to_string(m_rows));
    }
    if (m_cols % 8 != 0 || m_cols > k_max_cols) {
      throw UsageError("ch10:cluster_softmax: cols must be a multiple of 8 (16-byte rows) and at most " +
                       std::to_string(k_max_cols) + " (step 03 holds a row on chip), got " +
                       std::to_string(m_cols));
    }
    const std::size_t n = count();
    m_x = DeviceBuffer<__nv_bfloat16>(n);
    m_y = DeviceBuffer<__nv_bfloat16>(n);
    m_ref = DeviceBuffer<__nv_bfloat16>(n);
    m_partials = DeviceBuffer<float2>(static_cast<std::size_t>(m_rows) * k_chunks);
  }

  // Inputs in [-8, 8), as ch08:softmax: exp(x - max) spans e^-16 .. 1 within a row, so the max
  // subtraction and the sum both matter.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -8.0, 8.0, stream);
    launch_reference(m_x.data(), m_ref.data(), m_rows, m_cols, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), count(), DType::bf16}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), count(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), count(), DType::bf16}};
  }

  // As ch08:softmax: the reference is the exact softmax rounded to bf16 once; a step computes in fp32
  // (__expf, relative error ~1e-6 here; a sum of 128K positive terms in a tree, ~17 roundings deep) and
  // rounds once, so the two can land on neighbouring bf16 values: one ulp, at most 2^-7 of the value.
  // atol covers nothing real: outputs are >= e^-16 / cols ~ 4e-12 at cols = 2^18.
  Tolerance tolerance() const override { return {1e-13, 0x1.0p-7}; }

  // Minimum DRAM traffic: x read once, y written once. FLOPs (fp32, per element): subtract the max, exp
  // (counted as one), add to the sum, multiply by 1/sum.
  Work work() const override {
    const double bytes = 2.0 * static_cast<double>(count());
    return {.bytes = 2.0 * bytes, .flops = 4.0 * static_cast<double>(count()),
            .bytes_read = bytes, .bytes_written = bytes, .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_y.data(), m_partials.data(), m_rows, m_cols}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_rows) * m_cols; }

  int m_rows = 0;
  int m_cols = 0;
  DeviceBuffer<__nv_bfloat16> m_x;
  DeviceBuffer<__nv_bfloat16> m_y;
  DeviceBuffer<__nv_bfloat16> m_ref;
  DeviceBuffer<float2> m_partials;
};

// ch08:softmax's device pieces: __expf, the 16-byte view of 8 bf16, and the online (max, sum) pair.
using ch08::softmax::fast_exp;
using ch08::softmax::Vec8;
namespace online = ch08::softmax::online;

}  // namespace aisp::ch10::cluster_softmax
