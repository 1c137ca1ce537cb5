// ch04:tensor_parallel_gemm — the contract of the tensor-parallel MLP ladder: one Transformer MLP,
// Y = GELU(X W1^T) W2^T (no bias), split over R GPUs (ranks) as Megatron-LM splits it (Shoeybi et al.,
// "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model Parallelism", 2019, section 3):
// the first Linear column-parallel (rank r holds W1's rows [r f, (r + 1) f), f = ffn / R, and computes those
// f columns of H = X W1^T whole, so the GELU, elementwise, runs on its own), the second row-parallel (rank r
// holds W2's matching columns; its product G_r W2_r^T is a partial sum of Y), so that the only communication
// is summing the partials over ranks.
//
// Why the GELU is kept: it is what forces this split. With no activation, Y = X (W2 W1)^T and any split
// would do; GELU(a + b) != GELU(a) + GELU(b), so H's columns must be complete on one rank before the GELU,
// which is what a column-parallel first GEMM gives. It costs the reference nothing: the same kernel
// (gelu.cu, the tanh form) runs in the steps and the reference, and the host reference pins its formula.
//
// Each rank holds (bf16, seeded; reference.hpp says the scales): X (tokens x hidden), the same on every rank
// (the plain tensor-parallel form's replicated activations, as the attention block's all-reduce leaves
// them), W1_r (f x hidden) and W2_r (hidden x f). The output of rank r is its own tokens' rows of Y,
// [r T / R, (r + 1) T / R): all of Y, over the ranks, checked once. 01 all-reduces the partials, so every
// rank ends with all of Y and the gate checks each rank's own rows of it; the sequence-parallel steps
// (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022) start from
// rank r's own rows of X, all-gather the rest and reduce-scatter the partials, which leaves rank r exactly its
// own rows of Y. The storage is bf16 throughout, the collectives' sums included (reference.hpp, tolerances).
//
// The `phase` axis splits the step so that its exposed communication can be read off the report (README):
//   0  the step: GEMMs, GELU and collectives as the step schedules them; output: each rank's rows of Y;
//   1  its GEMMs and GELU only, on the same streams, in the same pieces; with no all-gather to read from, the
//      sequence-parallel steps read each rank's full X in token order (the same GEMM shapes; for 03 other
//      rows per chunk than the gathered ones); output: each rank's partial of Y (all tokens, token order);
//   2  its collectives only, the same calls on the same streams; input: partials that are stand-ins in
//      [-1, 1), the same every P = T / (R C) rows (below), and X; output: each rank's rows of the sum.
// Why phase 2's stand-ins repeat every P rows: the steps put tokens on the wire in different orders (02 rank
// by rank, 03 chunk by chunk, reference.hpp's ChunkRows); in phase 0 the GEMMs compute each row from the
// token the gathered X holds there, but phase 2 has no GEMMs, so the same stand-in rows sent in another order
// would give another sum. Stand-ins that repeat every piece give every order the same sum: one reference
// checks all three steps, each element written and summed over ranks, each piece's rows in order. Phase 0
// checks where every token lands.
// Declared work (core's placement takes the larger of the two floors; the README says what that means):
//   FLOPs  one rank's two GEMMs, 4 T hidden f, bf16, in phases 0 and 1 (every rank does its share at the
//          same time: that rate against one GPU's tensor ceiling is each GPU's; the model's FLOPs are R x);
//   bytes  nccl-tests' bus bytes of the step's collectives, 2 T hidden x 2 (R - 1) / R (all-reduce; the
//          all-gather plus reduce-scatter move the same), against the measured GPU<->GPU ceiling of the pair
//          rank 1 -> rank 0, in phases 0 and 2.
//
// One process drives every rank, as in ch04:overlap: rank r on GPU (harness GPU + r) % visible; a step forks
// from the harness stream to one stream per rank and joins back (common/rank_streams.hpp), so the harness's
// events time the slowest rank. Every rank's output is checked against references on rank 0's GPU
// (device_reference.cu). Needs two GPUs and NCCL: every step declares multi_gpu and all_gpus and is SKIPPED
// on one GPU, and SKIPPED where NCCL cannot be loaded.
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
#include "chapters/ch04_multi_gpu/common/wave_grid.hpp"
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/reference.hpp"
#include "core/base/error.hpp"
#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"
#include "kernels/common/lt_gemm_tn.hpp"

namespace aisp::ch04::tensor_parallel_gemm {

using bf16 = __nv_bfloat16;

struct Args {
  Shape shape;
  Phase phase = Phase::step;
  std::array<int, k_max_ranks> device{};      // rank r's GPU; device[0] is the harness's
  std::array<const bf16*, k_max_ranks> x{};   // rank r's X (tokens x hidden), the same on every rank
  std::array<const bf16*, k_max_ranks> w1{};  // rank r's W1 rows (f x hidden) (phases 0, 1)
  std::array<const bf16*, k_max_ranks> w2{};  // rank r's W2 columns (hidden x f, row-major) (phases 0, 1)
  std::array<bf16*, k_max_ranks> part{};      // rank r's partial of Y (tokens x hidden): the GEMMs' output
                                              // (phase 1, token order; phase 0, the step's order), phase 2's input
  std::array<bf16*, k_max_ranks> y{};         // rank r's Y (tokens x hidden); its own rows are checked (0, 2)
  int sm_count = 0;                           // of rank 0's GPU (one kind of GPU per host)
  int max_threads_per_sm = 0;

  int ranks() const { return shape.ranks; }
  std::span<const int> devices() const { return {device.data(), static_cast<std::size_t>(shape.ranks)}; }
  bool gemms() const { return runs_compute(phase); }
  bool comms() const { return runs_comms(phase); }
  // The element offset of a token's row in X, a partial or Y (all tokens x hidden).
  std::size_t row(std::size_t token) const { return token * static_cast<std::size_t>(shape.hidden); }
};

// h = GELU(h), elementwise, in place, on the current GPU (gelu.cu): between the two GEMMs, in the steps and
// in the reference. `n` is even (f is a multiple of 64).
void launch_gelu(const Args& a, bf16* h, std::size_t n, cudaStream_t stream);

// The gate's references on rank 0's GPU and what computes them there (device_reference.cu).
struct ReferenceArgs {
  LtGemmTn* up = nullptr;                 // GEMM1 over all tokens, on rank 0 (phases 0, 1)
  LtGemmTn* down = nullptr;               // GEMM2
  bf16* stage_w1 = nullptr;               // one rank's W1 and W2, copied to rank 0
  bf16* stage_w2 = nullptr;
  bf16* stage_h = nullptr;                // H, then G (tokens x f)
  bf16* stage_part = nullptr;             // one rank's partial (phase 0)
  float* sum = nullptr;                   // the sum over ranks, fp32 (phases 0, 2)
  std::array<bf16*, k_max_ranks> part{};  // rank r's partial (phase 1)
  std::array<bf16*, k_max_ranks> y{};     // rank r's rows of Y (phases 0, 2)
};

// The trusted reference on rank 0's GPU: every rank's partial by the reference's cuBLASLt plans over all
// tokens and the GELU kernel, on that rank's weights copied over and rank 0's X (phases 0, 1); then the sum
// over ranks in rank order, in fp32, of those partials (phase 0) or of the stand-ins each rank holds, read
// over peer access (phase 2), rounded to bf16 once, each rank's rows into its reference.
void launch_reference(const Args& a, const ReferenceArgs& ref, cudaStream_t stream);

class TensorParallelProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch04",
            .ladder = "tensor_parallel_gemm",
            .summary = "a Megatron tensor-parallel MLP over every GPU (column- then row-parallel bf16 GEMMs with a "
                       "GELU between): an all-reduce, sequence parallelism, collectives chunked behind the GEMMs "
                       "(axis phase splits them); bound: the larger of tensor-core time and bus-bandwidth time",
            .axes = {{.name = "tokens", .default_value = 4096,
                      .help = "rows of X and Y (a multiple of 8 x ranks x chunks): each rank's two GEMMs are "
                              "4 tokens hidden ffn / ranks FLOPs",
                      .test_value = 256},
                     {.name = "hidden", .default_value = 4096,
                      .help = "the model's width (a multiple of 64): X and Y are tokens x hidden bf16, 32 MiB at "
                              "the defaults",
                      .test_value = 64},
                     {.name = "ffn", .default_value = 16384,
                      .help = "the MLP's inner width, 4 x hidden by default (a multiple of 64 x ranks): rank r "
                              "holds ffn / ranks rows of W1 and columns of W2",
                      .test_value = 512},
                     {.name = "chunks", .default_value = 4,
                      .help = "03's pieces of each rank's tokens, each all-gathered, computed and reduce-scattered "
                              "in turn; 01 and 02 ignore it"},
                     ranks_axis(),
                     {.name = "phase", .default_value = 0, .help = k_phase_help, .min_value = 0}},
            .clock = ClockKind::gpu,
            .default_mode = k_ranks_mode};  // common/ranks.hpp: why hot
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const auto devices = rank_devices(axes.at("ranks"), device.device_count, device.index, k_ladder);
    const Shape shape = make_shape(axes.at("tokens"), axes.at("hidden"), axes.at("ffn"),
                                   static_cast<std::int64_t>(devices.size()), axes.at("chunks"));
    allocate_ranks(shape, phase_from_axis(axes.at("phase")), devices, device);
  }

  // The buffers of shape.ranks ranks on `devices` (devices[0] is the harness's and the current GPU).
  // allocate() passes two or more distinct GPUs; the GPU tests pass one (NCCL allows one rank per GPU, and
  // the harness's rank_devices refuses ranks=1), where each collective is a copy but every stream, event,
  // chunk and GEMM runs.
  void allocate_ranks(const Shape& shape, Phase phase, const std::vector<int>& devices, const DeviceFacts& device) {
    if (static_cast<int>(devices.size()) != shape.ranks) {
      throw UsageError(std::string(k_ladder) + ": the shape is for " + std::to_string(shape.ranks) + " rank(s), not " +
                       std::to_string(devices.size()));
    }
    m_shape = shape;
    m_phase = phase;
    std::copy(devices.begin(), devices.end(), m_device.begin());
    // Every pair: a step's collectives and the reference read other ranks' buffers, the gate (on rank 0)
    // every output.
    enable_peer_access_among(std::span<const int>(m_device.data(), devices.size()));
    const bool gemms = runs_compute(phase), comms = runs_comms(phase);
    for (auto* v : {&m_x, &m_w1, &m_w2, &m_part, &m_y, &m_ref_part, &m_ref_y}) v->clear();
    for (int r = 0; r < shape.ranks; ++r) {
      on_device(m_device[r], m_device[0], [&] {
        m_x.emplace_back(shape.activation_elements());
        if (gemms) {
          m_w1.emplace_back(shape.weight_elements());
          m_w2.emplace_back(shape.weight_elements());
        }
        m_part.emplace_back(shape.activation_elements());
        if (comms) m_y.emplace_back(shape.activation_elements());
      });
      // One reference per output (the harness masks each in place), all on rank 0's GPU beside the gate.
      if (phase == Phase::compute) m_ref_part.emplace_back(shape.activation_elements());
      if (comms) m_ref_y.emplace_back(shape.own_elements());
    }
    const std::size_t f_rows = static_cast<std::size_t>(shape.tokens) * shape.ffn_per_rank();
    m_stage_w1 = DeviceBuffer<bf16>(gemms ? shape.weight_elements() : 0);
    m_stage_w2 = DeviceBuffer<bf16>(gemms ? shape.weight_elements() : 0);
    m_stage_h = DeviceBuffer<bf16>(gemms ? f_rows : 0);
    m_stage_part = DeviceBuffer<bf16>(phase == Phase::step ? shape.activation_elements() : 0);
    m_sum = DeviceBuffer<float>(comms ? shape.activation_elements() : 0);
    m_ref_up.reset();
    m_ref_down.reset();
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    // A different stream of values per rank and tensor: the seed mixed with both.
    const auto mix = [&](int r, int tensor) { return (seed * k_max_ranks + r) * 4 + tensor; };
    // X once, copied to every rank: the replicated activations.
    fill_uniform(view("x", 0, m_x), mix(0, 0), -1.0, 1.0, stream);
    for (int r = 1; r < m_shape.ranks; ++r) {
      AISP_CUDA_CHECK(cudaMemcpyPeerAsync(m_x[r].data(), m_device[r], m_x[0].data(), m_device[0],
                                          m_x[0].size() * sizeof(bf16), stream));
    }
    for (int r = 0; r < m_shape.ranks; ++r) {
      if (runs_compute(m_phase)) {
        const double a1 = w1_scale(m_shape.hidden), a2 = w2_scale(m_shape.ffn);
        fill_uniform(view("w1", r, m_w1), mix(r, 1), -a1, a1, stream);
        fill_uniform(view("w2", r, m_w2), mix(r, 2), -a2, a2, stream);
      } else {
        fill_stand_ins(r, mix(r, 3), stream);
      }
    }
    if (runs_compute(m_phase) && !m_ref_up) {
      const int t = m_shape.tokens, h = m_shape.hidden, f = m_shape.ffn_per_rank();
      m_ref_up = std::make_unique<LtGemmTn>(t, f, h);
      m_ref_down = std::make_unique<LtGemmTn>(t, h, f);
    }
    launch_reference(args(), reference_args(), stream);
  }

  std::vector<TensorView> inputs() const override {
    auto v = views("x", m_x);
    const auto more = runs_compute(m_phase) ? concat(views("w1", m_w1), views("w2", m_w2)) : views("part", m_part);
    v.insert(v.end(), more.begin(), more.end());
    return v;
  }
  std::vector<TensorView> outputs() const override {
    if (m_phase == Phase::compute) return views("part", m_part);
    std::vector<TensorView> v;
    for (int r = 0; r < m_shape.ranks; ++r) {
      v.push_back({"y" + std::to_string(r), m_y[r].data() + own_token(m_shape, r) * m_shape.hidden,
                   m_shape.own_elements(), DType::bf16});
    }
    return v;
  }
  std::vector<TensorView> references() const override {
    return m_phase == Phase::compute ? views("ref_part", m_ref_part) : views("ref_y", m_ref_y);
  }
  // reference.hpp derives it: the GEMMs' accumulation order, the collective's bf16 additions in an unknown
  // order, the final roundings.
  Tolerance tolerance() const override {
    const ToleranceBound t = gate_tolerance(m_phase, m_shape);
    return {t.atol, t.rtol};
  }

  Work work() const override {
    Work w;
    if (runs_compute(m_phase)) {
      w.flops = m_shape.flops_per_rank();
      w.flop_dtype = "bf16";
    }
    if (runs_comms(m_phase)) {
      w.bytes = all_reduce_bus_bytes(m_shape);
      w.ceiling = m_shape.ranks > 1 ? p2p_ceiling_name(m_device[1], m_device[0], true) : "p2p";
    }
    return w;
  }

  Args args() const override {
    Args a{.shape = m_shape, .phase = m_phase, .sm_count = m_sm_count, .max_threads_per_sm = m_max_threads_per_sm};
    for (int r = 0; r < m_shape.ranks; ++r) {
      a.device[r] = m_device[r];
      a.x[r] = m_x[r].data();
      if (runs_compute(m_phase)) {
        a.w1[r] = m_w1[r].data();
        a.w2[r] = m_w2[r].data();
      }
      a.part[r] = m_part[r].data();
      if (runs_comms(m_phase)) a.y[r] = m_y[r].data();
    }
    return a;
  }

  // Every reference against the host's fp64 MLP with bf16 stored where the GPU stores it (the test size).
  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> x = to_host(view("x", 0, m_x), stream);
    std::vector<std::vector<double>> partials(m_shape.ranks);
    for (int r = 0; r < m_shape.ranks; ++r) {
      partials[r] = runs_compute(m_phase) ? host_partial(x, to_host(view("w1", r, m_w1), stream),
                                                       to_host(view("w2", r, m_w2), stream), m_shape)
                                        : to_host(view("part", r, m_part), stream);
    }
    const ToleranceBound t = host_check_tolerance(m_phase, m_shape);
    const std::vector<double> y = m_phase == Phase::compute ? std::vector<double>{} : host_rank_sum(partials);
    for (int r = 0; r < m_shape.ranks; ++r) {
      const std::string diff =
          m_phase == Phase::compute
              ? compare_on_host("ref_part" + std::to_string(r), to_host(view("ref_part", r, m_ref_part), stream),
                                partials[r], {t.atol, t.rtol})
              : compare_on_host("ref_y" + std::to_string(r), to_host(view("ref_y", r, m_ref_y), stream),
                                own_rows(y, m_shape, r), {t.atol, t.rtol});
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
  static std::vector<TensorView> concat(std::vector<TensorView> a, const std::vector<TensorView>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Phase 2's partials on rank r: P = T / (R C) rows of uniform values in [-1, 1), repeated down all T rows
  // (the header says why), by copies that double the filled rows each time (log2(R C) of them; peer copies
  // because the harness stream is rank 0's GPU's and the buffer rank r's).
  void fill_stand_ins(int r, std::uint64_t seed, cudaStream_t stream) {
    bf16* part = m_part[r].data();
    const std::size_t total = m_part[r].size();
    const std::size_t period = static_cast<std::size_t>(m_shape.piece_tokens(m_shape.chunks)) * m_shape.hidden;
    fill_uniform({"part" + std::to_string(r), part, period, DType::bf16}, seed, -1.0, 1.0, stream);
    for (std::size_t filled = period; filled < total; filled *= 2) {
      const std::size_t n = std::min(filled, total - filled);
      AISP_CUDA_CHECK(cudaMemcpyPeerAsync(part + filled, m_device[r], part, m_device[r], n * sizeof(bf16), stream));
    }
  }

  ReferenceArgs reference_args() const {
    ReferenceArgs ref{.up = m_ref_up.get(),
                      .down = m_ref_down.get(),
                      .stage_w1 = m_stage_w1.data(),
                      .stage_w2 = m_stage_w2.data(),
                      .stage_h = m_stage_h.data(),
                      .stage_part = m_stage_part.data(),
                      .sum = m_sum.data()};
    for (std::size_t r = 0; r < m_ref_part.size(); ++r) ref.part[r] = m_ref_part[r].data();
    for (std::size_t r = 0; r < m_ref_y.size(); ++r) ref.y[r] = m_ref_y[r].data();
    return ref;
  }

  Shape m_shape;
  Phase m_phase = Phase::step;
  std::array<int, k_max_ranks> m_device{};
  std::vector<DeviceBuffer<bf16>> m_x, m_w1, m_w2, m_part, m_y;  // [rank], on that rank's GPU
  std::vector<DeviceBuffer<bf16>> m_ref_part, m_ref_y;            // [rank], on rank 0's GPU
  DeviceBuffer<bf16> m_stage_w1, m_stage_w2, m_stage_h, m_stage_part;  // on rank 0's GPU
  DeviceBuffer<float> m_sum;                                           // on rank 0's GPU
  std::unique_ptr<LtGemmTn> m_ref_up, m_ref_down;  // on rank 0's GPU, made by the first generate()
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// Each rank's share of the MLP as the steps run it, `rows` tokens at a time: two cuBLASLt plans
// (kernels/common/lt_gemm_tn.hpp; GEMM1 H = X W1_r^T, rows x f; GEMM2 partial = G W2_r^T, rows x hidden;
// bf16 in and out, fp32 accumulation), the activation H between them (GELU in place), and, for the
// sequence-parallel steps, the gathered X (tokens x hidden). Made on each rank's GPU: the workspaces and
// buffers live there, the kernels launch there. One H buffer serves every piece: a rank's GEMMs run in
// order on its compute stream.
class RankMlp {
 public:
  void create(const Args& a, int rows, bool gathered) {
    const int h = a.shape.hidden, f = a.shape.ffn_per_rank();
    for (int r = 0; r < a.ranks(); ++r) {
      on_device(a.device[r], a.device[0], [&] {
        m_up[r] = std::make_unique<LtGemmTn>(rows, f, h);
        m_down[r] = std::make_unique<LtGemmTn>(rows, h, f);
        m_h[r] = DeviceBuffer<bf16>(static_cast<std::size_t>(rows) * f);
        m_gathered[r] = DeviceBuffer<bf16>(gathered ? a.shape.activation_elements() : 0);
      });
    }
  }

  // `rows` tokens of `x` (on rank r's GPU, row-major hidden) through GEMM1, the GELU and GEMM2 into `part`,
  // on `stream`, one of rank r's GPU.
  void run(const Args& a, int r, const bf16* x, bf16* part, cudaStream_t stream) {
    on_device(a.device[r], a.device[0], [&] {
      m_up[r]->run(x, a.w1[r], m_h[r].data(), stream);
      launch_gelu(a, m_h[r].data(), m_h[r].size(), stream);
      m_down[r]->run(m_h[r].data(), a.w2[r], part, stream);
    });
  }

  // Rank r's gathered X: where the sequence-parallel steps' all-gathers put every rank's tokens.
  bf16* gathered(int r) const { return m_gathered[r].data(); }

 private:
  std::array<std::unique_ptr<LtGemmTn>, k_max_ranks> m_up, m_down;
  std::array<DeviceBuffer<bf16>, k_max_ranks> m_h, m_gathered;
};

}  // namespace aisp::ch04::tensor_parallel_gemm
