// ch03:pinned_transfer — the contract of the upload ladder: bring n fp32 values from host memory to the
// GPU and run the kernel that consumes them (y = the `fma`-step map of reference.hpp, in place).
//
// This is a data loader's job: a batch sits in host memory, the GPU needs it, and a kernel uses it. Every
// step copies the same 4n bytes and runs the same per-element work; they differ in the host memory the
// bytes come from (pageable, 01; pinned, 02 and 03) and in whether the kernel waits for the whole copy
// (01, 02) or consumes each chunk while the next one crosses the bus (03).
//
// The host data exists twice, with the same contents: in pageable memory (new[], every page touched),
// which step 01 copies from, and in pinned memory (cudaHostAlloc), which steps 02 and 03 copy from. Two
// buffers, because pinning is a property of the allocation: one buffer pinned by one step would be pinned
// for every step. The pinned one is also mapped into the device's address space, so that the gate can
// hash it (the pageable one the GPU cannot read; the variants only ever read both).
//
// Clock: gpu (cold). The copy is the work: the harness's events on the stream bracket it whichever
// memory it comes from. A pageable copy makes the calling thread wait for the stream (the driver stages
// it through its own pinned buffers), so the harness times step 01 without its blocking kernel and
// says so in the result's notes; its host staging is then inside the samples, which is the lesson.
//
// Declared work: 4n bytes across PCIe, placed against the measured `h2d_pinned` ceiling (`aisp hw
// peaks`); 2n fma FLOPs. At the defaults, 256 MiB (~5 ms at a PCIe Gen5 x16's ~53 GB/s) and 0.14 TFLOP
// (~2 ms of a Hopper GPU's fp32 FMA rate): the copy bounds every step, and the best a step can do is to
// hide the kernel under the copy. (The default was 1 GiB until a first H100 run: the pageable copy's
// samples, ~150 ms each, spread by +-10% and a 5 s sampling budget could not narrow the median's interval
// to 3%; at 256 MiB the budget holds four times as many samples. 256 MiB is well past the size where the
// copy reaches the bus's rate.)
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "chapters/ch03_system/pinned_transfer/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch03::pinned_transfer {

// What every variant's launch receives. `out` holds garbage (the gate poisons it) until the variant
// copies into it and consumes it.
struct Args {
  const float* pageable;  // n values, pageable host memory
  const float* pinned;    // the same n values, pinned host memory
  float* out;             // n values on the device: the upload's destination, consumed in place
  std::size_t n;
  int fma;     // the consuming kernel's work per element
  int chunks;  // the overlapped step's pieces
};

// The ladder's consuming kernel (consume.cu), identical for every step: data[i] = the map of
// reference.hpp applied to data[i], for count elements, on `stream`.
void enqueue_consume(float* data, std::size_t count, int fma, cudaStream_t stream);

// The trusted device reference (device_reference.cu): a plain one-thread-per-element kernel of the same
// map, in place on `ref` (which holds the inputs).
void consume_on_device(float* ref, std::size_t n, int fma, cudaStream_t stream);

class PinnedTransferProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch03",
            .ladder = "pinned_transfer",
            .summary = "upload n fp32 from host memory and consume them: pageable -> pinned -> pinned chunks "
                       "overlapped with the kernel; bound: measured h2d_pinned",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 26,
                      .help = "fp32 values uploaded (default 2^26 = 256 MiB)",
                      // Odd: a short last chunk. Larger than a host's last-level cache: below that, step
                      // 01's timed samples read the pageable buffer from the CPU's cache (the harness
                      // flushes the GPU's L2, not the host's), while a launch on fresh inputs reads it from
                      // DRAM, and the fresh-input check rightly flags the difference (1.76x at 4 MiB on
                      // one H100 host).
                      .test_value = (std::int64_t{1} << 26) + 3},
                     {.name = "fma", .default_value = 1024,
                      .help = "dependent FMAs per element in the consuming kernel (0: a plain upload)",
                      .min_value = 0,
                      .test_value = 64,
                      .default_sweep = {0, 256, 1024, 4096}},
                     {.name = "chunks", .default_value = 16, .help = "pieces of the overlapped step (03)",
                      .test_value = 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold,
            // Step 01's pageable copies scatter by +-10% in two clusters of samples: at 3 s its interval
            // was +-7% to +-18% on one H200; the pinned steps converge in well under a second.
            .sampling_budget_s = 10};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const auto n = static_cast<std::size_t>(axes.at("n"));
    const std::int64_t fma = axes.at("fma"), chunks = axes.at("chunks");
    if (fma > (std::int64_t{1} << 20) || chunks > (std::int64_t{1} << 16)) {
      throw UsageError("ch03:pinned_transfer: fma must be <= 2^20 and chunks <= 65536");
    }
    m_args = {nullptr, nullptr, nullptr, n, static_cast<int>(fma), static_cast<int>(chunks)};
    m_pageable = std::make_unique<float[]>(n);  // value-initialized: every page touched before any copy
    // Mapped, and its device address taken, so that the gate's kernels can hash it (inputs()).
    m_pinned = PinnedBuffer<float>(n, cudaHostAllocMapped);
    void* view = nullptr;
    AISP_CUDA_CHECK(cudaHostGetDevicePointer(&view, m_pinned.data(), 0));
    m_pinned_view = static_cast<float*>(view);
    m_out = DeviceBuffer<float>(n);
    m_ref = DeviceBuffer<float>(n);
    m_args.pageable = m_pageable.get();
    m_args.pinned = m_pinned.data();
    m_args.out = m_out.data();
  }

  // The inputs are drawn on the device (into `out`, which the gate poisons before any variant runs),
  // copied to the pinned buffer and from there to the pageable one; the reference is the same values
  // consumed by the reference kernel.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const std::size_t bytes = m_args.n * sizeof(float);
    fill_uniform({"x", m_out.data(), m_args.n, DType::f32}, seed, -1.0, 1.0, stream);
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_pinned.data(), m_out.data(), bytes, cudaMemcpyDeviceToHost, stream));
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_ref.data(), m_out.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    consume_on_device(m_ref.data(), m_args.n, m_args.fma, stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::memcpy(m_pageable.get(), m_pinned.data(), bytes);
  }

  // Before every timed sample, outside the window: the host half of generate() again, the pageable batch
  // written from the pinned one (the same values, so the references stand), as a loader writes each batch
  // before its upload. Without it, step 01's samples copied a pageable buffer the CPU last wrote many
  // launches before, while its launches on fresh inputs, right after generate(), ran 1.14-1.33x slower on
  // one H200 (2026-11-28), and the fresh-input check once called that state kept between launches
  // (INVALID at 1.33x): a loader never uploads an untouched batch twice. The pinned steps' fresh ratio
  // was 1.00; they get the same preparation.
  bool prepare_sample() override {
    std::memcpy(m_pageable.get(), m_pinned.data(), m_args.n * sizeof(float));
    return false;
  }

  std::vector<TensorView> inputs() const override {
    return {{"x_pinned", m_pinned_view, m_args.n, DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"y", m_out.data(), m_args.n, DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), m_args.n, DType::f32}};
  }

  // Exact: the copy moves bits, and every step and the reference apply the same chain of correctly
  // rounded fmas (fmaf) to each element, so the results are bit-identical.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_args.n);
    return {.bytes = 4 * n,
            .flops = 2 * n * m_args.fma,
            .bytes_read = 4 * n,
            .bytes_written = 0,
            .flop_dtype = "fp32",
            .ceiling = "h2d_pinned"};
  }

  Args args() const override { return m_args; }

  bool has_host_reference() const override { return true; }
  // The host applies the same map with std::fma (correctly rounded, as fmaf is): bit-identical. The
  // inputs are read where they live, in host memory (after the stream's work that wrote them).
  std::string check_reference_on_host(cudaStream_t stream) override {
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> want(m_args.n);
    for (std::size_t i = 0; i < m_args.n; ++i) want[i] = consume_reference(m_pinned.data()[i], m_args.fma);
    return compare_on_host("y_ref", to_host(references().front(), stream), want, {0.0, 0.0});
  }

 private:
  Args m_args{};
  std::unique_ptr<float[]> m_pageable;
  PinnedBuffer<float> m_pinned;
  float* m_pinned_view = nullptr;  // m_pinned as kernels address it (cudaHostGetDevicePointer)
  DeviceBuffer<float> m_out, m_ref;
};

}  // namespace aisp::ch03::pinned_transfer
