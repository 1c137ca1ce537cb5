// ch04:overlap — the contract of the overlap ladder: one data-parallel training step's backward pass over R
// GPUs (ranks), its weight-gradient GEMMs and the all-reduce of their gradients, scheduled so that the
// communication hides behind the compute or not.
//
// Each rank holds L layers' activations X_l and output gradients dY_l (tokens x hidden, bf16, seeded per
// rank: each rank sees its own share of the batch, as in data parallelism). Backward produces, last layer
// first, each layer's weight gradient dW_l = dY_l^T X_l (hidden x hidden, fp32; cuBLASLt bf16 GEMM with
// fp32 accumulation, wgrad_gemm.hpp). The step's result is every rank's sum over ranks of the gradients
// (the sum, not the mean: ncclSum; DDP gets the mean by dividing each gradient by R before its all-reduce,
// which moves no more bytes), all-reduced out of place from the local gradients (`grad`) into `out` by
// NCCL. The GEMMs write dW_l into layer l's
// slice of one flat gradient buffer, so any run of consecutive layers is one contiguous bucket.
//
// The `phase` axis splits the step so that its exposed communication can be read off the report (README):
//   0  the step: GEMMs and all-reduces as the step schedules them; outputs `grad` and `out` on every rank;
//   1  its GEMMs only, on the same streams; output `grad`;
//   2  its all-reduces only, the same buckets on the same streams; inputs `grad` (fp32 stand-ins in
//      [-1, 1]: an all-reduce's time does not depend on the values), output `out`.
// Declared work (core's placement takes the larger of the two floors; the README says what it means):
//   FLOPs  2 L hidden^2 tokens, bf16, in phases 0 and 1;
//   bytes  nccl-tests' bus bytes of the all-reduce, L hidden^2 4 x 2 (R - 1) / R, against the measured
//          GPU<->GPU ceiling of the pair rank 1 -> rank 0 (as ch04:allreduce), in phases 0 and 2.
//
// One process drives every rank, as in ch04:allreduce: rank r on GPU (harness GPU + r) % visible; a step
// forks from the harness stream to one stream per rank and joins back (common/rank_streams.hpp), so the
// harness's events time the slowest rank. Every rank's outputs are checked against references on rank 0's
// GPU (device_reference.cu): the same cuBLASLt GEMM on rank r's inputs copied there, and a sum over ranks in
// rank order. Needs two GPUs and NCCL: every step declares multi_gpu and all_gpus and is SKIPPED on one GPU,
// and SKIPPED where NCCL cannot be loaded.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "chapters/ch04_multi_gpu/common/rank_streams.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/overlap/reference.hpp"
#include "chapters/ch04_multi_gpu/overlap/wgrad_gemm.hpp"
#include "core/base/error.hpp"
#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch04::overlap {

struct Args {
  Shape shape;
  Phase phase = Phase::step;
  std::size_t bucket_bytes = 0;                        // 03's to 05's bucket cap (axis bucket_mb)
  int sm_margin = 0;                                   // SMs 05's GEMMs leave to NCCL (axis sm_margin)
  int ranks = 0;
  std::array<int, k_max_ranks> device{};               // rank r's GPU; device[0] is the harness's
  std::array<const __nv_bfloat16*, k_max_ranks> x{};   // rank r's X_l, layer l at l x tokens x hidden (0, 1)
  std::array<const __nv_bfloat16*, k_max_ranks> dy{};  // rank r's dY_l, the same layout (phases 0, 1)
  std::array<float*, k_max_ranks> grad{};              // rank r's dW_l, layer l at l x hidden^2: the GEMMs'
                                                       // output, phase 2's input
  std::array<float*, k_max_ranks> out{};               // rank r's reduced gradients, same layout (0, 2)
  int sm_count = 0;                                    // of rank 0's GPU (one kind of GPU per host)
  int max_threads_per_sm = 0;

  std::span<const int> devices() const { return {device.data(), static_cast<std::size_t>(ranks)}; }
  bool gemms() const { return runs_compute(phase); }
  bool reduces() const { return runs_comms(phase); }

  // Layer l's operands and gradient on rank r.
  std::size_t rows() const { return static_cast<std::size_t>(shape.tokens) * shape.hidden; }
  const __nv_bfloat16* x_of(int r, int l) const { return x[r] + l * rows(); }
  const __nv_bfloat16* dy_of(int r, int l) const { return dy[r] + l * rows(); }
  float* grad_of(int r, int l) const { return grad[r] + l * shape.layer_elements(); }
  // Bucket b's slice of rank r's local and reduced gradients, and its element count.
  float* grad_of(int r, const Bucket& b) const { return grad_of(r, b.first_layer); }
  float* out_of(int r, const Bucket& b) const { return out[r] + b.first_layer * shape.layer_elements(); }
  std::size_t count_of(const Bucket& b) const { return b.layers * shape.layer_elements(); }
};

// The gate's references on rank 0's GPU and what computes them there (device_reference.cu).
struct ReferenceArgs {
  WgradGemm* gemm = nullptr;                           // on rank 0 (phases 0, 1)
  __nv_bfloat16* stage_x = nullptr;                    // one layer's X and dY of any rank, copied to rank 0
  __nv_bfloat16* stage_dy = nullptr;
  std::array<float*, k_max_ranks> grad{};              // rank r's local gradients (phases 0, 1)
  std::array<float*, k_max_ranks> out{};               // rank r's reduced gradients (phases 0, 2)
};

// The trusted reference on rank 0's GPU: every rank's GEMMs by `ref.gemm` (the steps' cuBLASLt plan, checked
// against the host at the test size) on that rank's operands copied over, then the sum over ranks in rank
// order, of those (phase 0) or of the stand-in gradients read over peer access (phase 2).
void launch_reference(const Args& a, const ReferenceArgs& ref, cudaStream_t stream);

class OverlapProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch04",
            .ladder = "overlap",
            .summary = "a data-parallel backward pass over every GPU: L bf16 wgrad GEMMs and the all-reduce of their "
                       "fp32 gradients, serial or bucketed behind the compute (axis phase splits them); bound: "
                       "the larger of tensor-core time and bus-bandwidth time",
            .axes = {{.name = "layers", .default_value = 16,
                      .help = "layers, each with one hidden x hidden weight gradient (backward goes last to first)",
                      .test_value = 3},
                     {.name = "hidden", .default_value = 4096,
                      .help = "hidden size (a multiple of 16): each layer's gradient is hidden^2 fp32, 64 MiB at 4096",
                      .min_value = 16, .test_value = 64},
                     {.name = "tokens", .default_value = 4096,
                      .help = "rows of each rank's X and dY (a multiple of 16): each GEMM is 2 hidden^2 tokens FLOPs",
                      .min_value = 16, .test_value = 128},
                     {.name = "bucket_mb", .default_value = 25,
                      .help = "03's to 05's bucket cap in MiB, as DDP's bucket_cap_mb (default 25, DDP's); the first "
                              "bucket closes at 1 MiB, as DDP's; 01 and 02 ignore it"},
                     {.name = "sm_margin", .default_value = k_default_sm_margin,
                      .help = "05's GEMMs are planned for all but this many SMs, which NCCL's kernels find free; the "
                              "other steps ignore it",
                      .min_value = 1, .omit_at_default = true},
                     ranks_axis(),
                     {.name = "phase", .default_value = 0, .help = k_phase_help, .min_value = 0}},
            .clock = ClockKind::gpu,
            .default_mode = k_ranks_mode};  // common/ranks.hpp: why hot
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const Shape shape = make_shape(axes.at("layers"), axes.at("hidden"), axes.at("tokens"));
    allocate_ranks(shape, phase_from_axis(axes.at("phase")), bucket_bytes_from_mb(axes.at("bucket_mb")),
                   rank_devices(axes.at("ranks"), device.device_count, device.index, "ch04:overlap"), device);
    m_sm_margin = sm_margin_from_axis(axes.at("sm_margin"), device.sm_count);
  }

  // The buffers of ranks on `devices` (devices[0] is the harness's and the current GPU). allocate() passes
  // two or more distinct GPUs; the GPU tests pass one (NCCL allows one rank per GPU, and the harness's
  // rank_devices refuses ranks=1), where each all-reduce is a copy but every stream, event, bucket and GEMM
  // runs.
  void allocate_ranks(const Shape& shape, Phase phase, std::size_t bucket_bytes, const std::vector<int>& devices,
                      const DeviceFacts& device) {
    const int ranks = static_cast<int>(devices.size());
    if (ranks < 1 || ranks > k_max_ranks) {
      throw UsageError("ch04:overlap: 1 to " + std::to_string(k_max_ranks) + " ranks (one NVLink domain)");
    }
    m_shape = shape;
    m_phase = phase;
    m_bucket_bytes = bucket_bytes;
    m_ranks = ranks;
    std::copy(devices.begin(), devices.end(), m_device.begin());
    // Every pair: the reference reads every rank's operands and stand-ins, the gate (on rank 0) every output.
    enable_peer_access_among(std::span<const int>(m_device.data(), static_cast<std::size_t>(ranks)));
    const bool gemms = runs_compute(phase), reduces = runs_comms(phase);
    m_x.clear();
    m_dy.clear();
    m_grad.clear();
    m_out.clear();
    m_ref_grad.clear();
    m_ref_out.clear();
    for (int r = 0; r < ranks; ++r) {
      on_device(m_device[r], m_device[0], [&] {
        if (gemms) {
          m_x.emplace_back(shape.activation_elements());
          m_dy.emplace_back(shape.activation_elements());
        }
        m_grad.emplace_back(shape.gradient_elements());
        if (reduces) m_out.emplace_back(shape.gradient_elements());
      });
      // One reference per output (the harness masks each in place), all on rank 0's GPU beside the gate.
      if (gemms) m_ref_grad.emplace_back(shape.gradient_elements());
      if (reduces) m_ref_out.emplace_back(shape.gradient_elements());
    }
    const std::size_t layer_rows = static_cast<std::size_t>(shape.tokens) * shape.hidden;
    m_stage_x = DeviceBuffer<__nv_bfloat16>(gemms ? layer_rows : 0);
    m_stage_dy = DeviceBuffer<__nv_bfloat16>(gemms ? layer_rows : 0);
    m_ref_gemm.reset();
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    // A different stream of values per rank and tensor: the seed mixed with both.
    const auto mix = [&](int r, int tensor) { return (seed * k_max_ranks + r) * 3 + tensor; };
    for (int r = 0; r < m_ranks; ++r) {
      if (runs_compute(m_phase)) {
        fill_uniform(view("x", r, m_x), mix(r, 0), -1.0, 1.0, stream);
        fill_uniform(view("dy", r, m_dy), mix(r, 1), -1.0, 1.0, stream);
      } else {
        fill_uniform(view("grad", r, m_grad), mix(r, 2), -1.0, 1.0, stream);
      }
    }
    if (runs_compute(m_phase) && !m_ref_gemm) m_ref_gemm = std::make_unique<WgradGemm>(m_shape.hidden, m_shape.tokens);
    launch_reference(args(), reference_args(), stream);
  }

  std::vector<TensorView> inputs() const override {
    if (!runs_compute(m_phase)) return views("grad", m_grad);
    auto v = views("x", m_x);
    const auto dy = views("dy", m_dy);
    v.insert(v.end(), dy.begin(), dy.end());
    return v;
  }
  std::vector<TensorView> outputs() const override { return per_phase("grad", m_grad, "out", m_out); }
  std::vector<TensorView> references() const override {
    return per_phase("ref_grad", m_ref_grad, "ref_out", m_ref_out);
  }
  // reference.hpp derives it: the GEMM allowance plus the sum over ranks in an unknown order.
  Tolerance tolerance() const override { return {gate_atol(m_phase, m_ranks, m_shape.tokens), 0.0}; }

  Work work() const override {
    Work w;
    if (runs_compute(m_phase)) {
      w.flops = m_shape.flops();
      w.flop_dtype = "bf16";
    }
    if (runs_comms(m_phase)) {
      w.bytes = all_reduce_bus_bytes(m_shape, m_ranks);
      w.ceiling = m_ranks > 1 ? p2p_ceiling_name(m_device[1], m_device[0], true) : "p2p";
    }
    return w;
  }

  Args args() const override {
    Args a{.shape = m_shape,
           .phase = m_phase,
           .bucket_bytes = m_bucket_bytes,
           .sm_margin = m_sm_margin,
           .ranks = m_ranks,
           .sm_count = m_sm_count,
           .max_threads_per_sm = m_max_threads_per_sm};
    for (int r = 0; r < m_ranks; ++r) {
      a.device[r] = m_device[r];
      if (runs_compute(m_phase)) {
        a.x[r] = m_x[r].data();
        a.dy[r] = m_dy[r].data();
      }
      a.grad[r] = m_grad[r].data();
      if (runs_comms(m_phase)) a.out[r] = m_out[r].data();
    }
    return a;
  }

  // Every reference against the host's fp64 GEMMs and sums (the test size: a few layers of 64 x 64).
  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    std::vector<std::vector<double>> local(m_ranks);
    for (int r = 0; r < m_ranks; ++r) {
      local[r] = runs_compute(m_phase) ? host_local_grads(to_host(view("dy", r, m_dy), stream),
                                                        to_host(view("x", r, m_x), stream), m_shape)
                                     : to_host(view("grad", r, m_grad), stream);
    }
    const Tolerance gemm_tol{host_check_atol(Phase::compute, m_ranks, m_shape.tokens), 0.0};
    const Tolerance sum_tol{host_check_atol(m_phase, m_ranks, m_shape.tokens), 0.0};
    const std::vector<double> sum = runs_comms(m_phase) ? host_rank_sum(local) : std::vector<double>{};
    for (int r = 0; r < m_ranks; ++r) {
      std::string diff;
      if (runs_compute(m_phase)) {
        diff = compare_on_host("ref_grad" + std::to_string(r), to_host(view("ref_grad", r, m_ref_grad), stream),
                               local[r], gemm_tol);
      }
      if (diff.empty() && runs_comms(m_phase)) {
        diff = compare_on_host("ref_out" + std::to_string(r), to_host(view("ref_out", r, m_ref_out), stream), sum,
                               sum_tol);
      }
      if (!diff.empty()) return diff;
    }
    return {};
  }

 private:
  template <class T>
  static TensorView view(const std::string& name, int r, const std::vector<DeviceBuffer<T>>& buffers) {
    const auto& b = buffers[static_cast<std::size_t>(r)];
    return {name + std::to_string(r), b.data(), b.size(), std::is_same_v<T, float> ? DType::f32 : DType::bf16};
  }
  template <class T>
  static std::vector<TensorView> views(const std::string& name, const std::vector<DeviceBuffer<T>>& buffers) {
    std::vector<TensorView> v;
    for (std::size_t r = 0; r < buffers.size(); ++r) v.push_back(view(name, static_cast<int>(r), buffers));
    return v;
  }
  // The step's outputs are the local and the reduced gradients; the GEMMs' the local ones; the
  // all-reduces' the reduced ones (their local gradients are inputs).
  std::vector<TensorView> per_phase(const std::string& local_name, const std::vector<DeviceBuffer<float>>& local,
                                    const std::string& reduced_name,
                                    const std::vector<DeviceBuffer<float>>& reduced) const {
    std::vector<TensorView> v;
    if (runs_compute(m_phase)) v = views(local_name, local);
    if (runs_comms(m_phase)) {
      const auto r = views(reduced_name, reduced);
      v.insert(v.end(), r.begin(), r.end());
    }
    return v;
  }

  ReferenceArgs reference_args() const {
    ReferenceArgs ref{.gemm = m_ref_gemm.get(), .stage_x = m_stage_x.data(), .stage_dy = m_stage_dy.data()};
    for (std::size_t r = 0; r < m_ref_grad.size(); ++r) ref.grad[r] = m_ref_grad[r].data();
    for (std::size_t r = 0; r < m_ref_out.size(); ++r) ref.out[r] = m_ref_out[r].data();
    return ref;
  }

  Shape m_shape;
  Phase m_phase = Phase::step;
  std::size_t m_bucket_bytes = 0;
  int m_sm_margin = k_default_sm_margin;  // allocate() sets the axis; the GPU tests keep the default
  int m_ranks = 1;
  std::array<int, k_max_ranks> m_device{};
  std::vector<DeviceBuffer<__nv_bfloat16>> m_x, m_dy;  // [rank], on that rank's GPU
  std::vector<DeviceBuffer<float>> m_grad, m_out;      // [rank], on that rank's GPU
  std::vector<DeviceBuffer<float>> m_ref_grad, m_ref_out;  // [rank], on rank 0's GPU
  DeviceBuffer<__nv_bfloat16> m_stage_x, m_stage_dy;      // on rank 0's GPU
  std::unique_ptr<WgradGemm> m_ref_gemm;                  // on rank 0's GPU, made by the first generate()
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One cuBLASLt plan per rank, each made on its rank's GPU (its workspace lives there, its kernels launch
// there): the steps' GEMMs.
class RankGemms {
 public:
  // sm_count_target > 0: every plan is made for that many SMs (WgradGemm), 0 for the whole GPU.
  void create(const Args& a, int sm_count_target = 0) {
    for (int r = 0; r < a.ranks; ++r) {
      on_device(a.device[r], a.device[0], [&] {
        m_plan[r] = std::make_unique<WgradGemm>(a.shape.hidden, a.shape.tokens, sm_count_target);
      });
    }
  }
  // Layer l's weight gradient on rank r: dW_l = dY_l^T X_l into its slice of the gradient buffer, on
  // `stream` (one of rank r's GPU).
  void run(const Args& a, int r, int l, cudaStream_t stream) {
    on_device(a.device[r], a.device[0], [&] { m_plan[r]->run(a.dy_of(r, l), a.x_of(r, l), a.grad_of(r, l), stream); });
  }

 private:
  std::array<std::unique_ptr<WgradGemm>, k_max_ranks> m_plan;
};

}  // namespace aisp::ch04::overlap
