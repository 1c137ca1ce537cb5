// ch14:jit_specialize — the contract of the permute ladder: attention's head split of a 16-bit tensor,
// out[b][h][s][d] = in[b][s][h][d], with every dim and stride known only at run time.
//
// A permute moves every element once: 2 bytes read and 2 written per element, no arithmetic, so the
// bound is the DRAM copy bandwidth. The default [16, 4096, 32, 64] moves 2^27 elements, 0.54 GB per
// launch, ten times an H100's L2. What keeps a generic kernel off that bound is its index arithmetic:
// with run-time dims, finding an element's coordinates costs three integer divisions by run-time
// divisors per 4 bytes moved (permute_kernel.cuh). The ladder is about what compiling the shapes in
// (NVRTC at run time, 02) buys over the same source compiled once for every shape (nvcc, 01).
//
// Timing: the GPU clock, launches only. 02 compiles (or loads its cached cubin) in setup(), outside the
// measured window; the compile and load times are facts beside the time (jit_compile_ms, jit_load_ms,
// jit_cache) and a line in the worker's log, not part of the measurement: a JIT pays them once per
// shape and process, then every launch is a plain launch.
//
// Elements are fp16 for the gate (poison, compare, hash) but the kernels only move 16-bit patterns.
// Tolerance 0: a permute copies bits.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "chapters/ch14_compilers/jit_specialize/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch14::jit_specialize {

// What every variant's launch receives.
struct Args {
  const std::uint16_t* in;  // [batch, seq, heads, head_dim], fp16 bits
  std::uint16_t* out;       // [batch, heads, seq, head_dim]
  PermuteShape shape;       // output dims and the input stride each walks (reference.hpp)
};

inline constexpr int k_threads = 256;  // both steps: one output element per thread

// The trusted device reference (device_reference.cu): one thread per *input* element, scattering it to
// its output place with 64-bit index arithmetic, the opposite formulation to the variants'.
void head_split_on_device(const std::uint16_t* in, std::uint16_t* out, std::uint32_t batch, std::uint32_t seq,
                          std::uint32_t heads, std::uint32_t head_dim, cudaStream_t stream);

class JitSpecializeProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    // Test sizes: all different, none a power of two, so a mix-up of dims fails and the specialized
    // divisions take the multiply-high path rather than shifts.
    return {.chapter = "ch14",
            .ladder = "jit_specialize",
            .summary = "4-D permute (attention head split, fp16) with run-time shapes vs NVRTC-compiled shapes; "
                       "bound: DRAM copy",
            .axes = {{.name = "batch", .default_value = 16, .help = "batch size", .test_value = 3},
                     {.name = "seq", .default_value = 4096, .help = "sequence length", .test_value = 100},
                     {.name = "heads", .default_value = 32, .help = "attention heads", .test_value = 5},
                     {.name = "head_dim", .default_value = 64, .help = "elements per head (contiguous)",
                      .test_value = 24}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const std::array<std::uint64_t, 4> dims = {static_cast<std::uint64_t>(axes.at("batch")),
                                               static_cast<std::uint64_t>(axes.at("seq")),
                                               static_cast<std::uint64_t>(axes.at("heads")),
                                               static_cast<std::uint64_t>(axes.at("head_dim"))};
    if (const std::string why = check_dims(dims); !why.empty()) throw UsageError("ch14:jit_specialize: " + why);
    m_batch = static_cast<std::uint32_t>(dims[0]);
    m_seq = static_cast<std::uint32_t>(dims[1]);
    m_heads = static_cast<std::uint32_t>(dims[2]);
    m_head_dim = static_cast<std::uint32_t>(dims[3]);
    m_shape = head_split(m_batch, m_seq, m_heads, m_head_dim);
    m_in = DeviceBuffer<std::uint16_t>(m_shape.count);
    m_out = DeviceBuffer<std::uint16_t>(m_shape.count);
    m_ref = DeviceBuffer<std::uint16_t>(m_shape.count);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    head_split_on_device(m_in.data(), m_ref.data(), m_batch, m_seq, m_heads, m_head_dim, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"in", m_in.data(), m_in.size(), DType::f16}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_out.size(), DType::f16}}; }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_ref.size(), DType::f16}};
  }

  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double moved = 2.0 * static_cast<double>(m_shape.count);
    return {.bytes = 2 * moved, .flops = 0, .bytes_read = moved, .bytes_written = moved};
  }

  Args args() const override { return {m_in.data(), m_out.data(), m_shape}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto want = permute_reference(to_host(inputs().front(), stream), m_shape);
    return compare_on_host("out_ref", to_host(references().front(), stream), want, {0.0, 0.0});
  }

 private:
  std::uint32_t m_batch = 0, m_seq = 0, m_heads = 0, m_head_dim = 0;
  PermuteShape m_shape;
  DeviceBuffer<std::uint16_t> m_in, m_out, m_ref;
};

inline unsigned blocks_for(const PermuteShape& p) { return (p.count + k_threads - 1) / k_threads; }

}  // namespace aisp::ch14::jit_specialize
