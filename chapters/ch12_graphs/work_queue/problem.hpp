// ch12:work_queue — the contract of the skewed-work ladder: for a batch of `items` variable-length items
// (lengths heavy-tailed, reference.hpp), out[i] = sum over item i's elements x[j] of f(x[j]), f a fixed
// degree-128 polynomial (128 FMAs per element). An item's cost is proportional to its length.
//
// The ladder is about who decides which block does which item. A static split gives each block of a
// fixed grid a contiguous range of items up front; with skewed lengths some ranges hold far more work
// than others and the grid waits for the slowest. An atomic work queue lets each block take the next
// item when it is free, so the SMs stay busy until the work runs out. Both steps run the same grid
// (SMs x resident blocks per SM), the same per-item code and the same summation order: their outputs
// are bit for bit the same, and both are compared with the reference.
//
// Bound ("balanced SMs"): the total work spread evenly over every SM at the rate one SM reaches on this
// loop when it is busy: T >= E * 128 FMAs / (SMs * FMAs per SM per second), E the total elements. The
// declared FLOPs place each step against the measured FP32 ceiling (`aisp hw peaks`), which is that rate
// if the loop runs at peak; the static step's own per-element rate, measured on a balanced order, gives
// the other reading (README).
//
// Sizes: 16,384 items of 1,024 to 65,536 elements (57 M elements, 228 MB of x, ~15 GFLOP at the default
// shape): a few hundred µs per launch, compute-bound (64 flop per byte read). Clock: gpu (the subject is
// device-side: idle SMs, not host cost). Mode: cold (x is many times the L2). Step 02 resets its queue
// counter with a 4-byte memset on the stream inside its launch: part of its cost, inside the window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch12_graphs/work_queue/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch12::work_queue {

struct Args {
  const float* x;               // offsets[items] elements, in [0, 1)
  const std::int32_t* offsets;  // items + 1: item i is x[offsets[i] .. offsets[i + 1])
  float* out;                   // items
  int items;
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
};

inline constexpr int k_threads = k_block_threads;  // one block per item at a time

// The trusted device reference (device_reference.cu): one block per item, the features summed in double.
void sum_items_on_device(const float* x, const std::int32_t* offsets, int items, float* out, cudaStream_t stream);

class WorkQueueProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch12",
            .ladder = "work_queue",
            .summary = "skewed per-item work: static split of items over a fixed grid vs an atomic work queue; "
                       "bound: balanced SMs",
            .axes = {{.name = "items",
                      .default_value = 16384,
                      .help = "items (sequences) of 1,024 to 65,536 elements, Pareto-distributed lengths",
                      .test_value = 300},
                     {.name = "order",
                      .default_value = 0,
                      .help = "item order: 0 shuffled (as drawn), 1 longest first, 2 shortest first",
                      .min_value = 0,
                      .default_sweep = {0, 1, 2}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t items = axes.at("items"), order = axes.at("order");
    if (items > (std::int64_t{1} << 18)) throw UsageError("ch12:work_queue: items must be at most 2^18");
    if (order > 2) {
      throw UsageError("ch12:work_queue: order must be 0 (shuffled), 1 (longest first) or 2 (shortest first)");
    }
    const auto len = make_lengths(items, static_cast<Order>(order));
    const auto off = make_offsets(len);
    if (off.back() > (std::int64_t{1} << 30)) {  // 32-bit offsets, with room for the kernels' last round
      throw UsageError("ch12:work_queue: at most 2^30 elements (fewer items)");
    }
    m_items = static_cast<int>(items);
    m_elements = static_cast<std::size_t>(off.back());
    m_host_offsets.assign(off.begin(), off.end());  // narrowed: checked above
    m_x = DeviceBuffer<float>(m_elements);
    m_offsets = DeviceBuffer<std::int32_t>(m_host_offsets.size());
    m_out = DeviceBuffer<float>(static_cast<std::size_t>(m_items));
    m_ref = DeviceBuffer<float>(static_cast<std::size_t>(m_items));
    m_sm_count = device.sm_count;
  }

  // The offsets are the same for every seed (the shape); x is drawn from the seed.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_offsets.data(), m_host_offsets.data(), m_offsets.bytes(),
                                    cudaMemcpyHostToDevice, stream));
    fill_uniform(inputs().front(), seed, 0.0, 1.0, stream);
    sum_items_on_device(m_x.data(), m_offsets.data(), m_items, m_ref.data(), stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the pageable copy's source must outlive it
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), m_elements, DType::f32},
            {"offsets", m_offsets.data(), m_offsets.size(), DType::i32}};
  }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), count(), DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"out_ref", m_ref.data(), count(), DType::f32}}; }

  // Sums of positive terms: a relative bound holds for any summation order (reference.hpp), ~1.6e-5.
  Tolerance tolerance() const override { return {0.0, relative_tolerance()}; }

  Work work() const override {
    const double e = static_cast<double>(m_elements);
    const double read = sizeof(float) * e + sizeof(std::int32_t) * static_cast<double>(m_items + 1);
    const double written = sizeof(float) * static_cast<double>(m_items);
    return {.bytes = read + written,
            .flops = (2.0 * k_degree + 1.0) * e,  // 128 FMAs and one add per element
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_offsets.data(), m_out.data(), m_items, m_sm_count}; }

  bool has_host_reference() const override { return true; }
  // The host evaluates the same fp32 features (fmaf is exact-rounded on both sides) and sums them in
  // double like the device reference; only the double summation order differs, so the two floats agree
  // to within one float rounding.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x64 = to_host(inputs().front(), stream);
    const std::vector<float> x(x64.begin(), x64.end());
    std::vector<double> want(count());
    for (std::size_t i = 0; i < count(); ++i) {
      want[i] = static_cast<float>(item_sum_reference(x.data(), m_host_offsets[i], m_host_offsets[i + 1]));
    }
    return compare_on_host("out_ref", to_host(references().front(), stream), want, {0.0, 0x1.0p-23});
  }

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_items); }

  int m_items = 0;
  std::size_t m_elements = 0;
  std::vector<std::int32_t> m_host_offsets;
  DeviceBuffer<float> m_x;
  DeviceBuffer<std::int32_t> m_offsets;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
};

}  // namespace aisp::ch12::work_queue
