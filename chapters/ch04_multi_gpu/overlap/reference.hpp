// ch04:overlap — the host side of the contract: the phases, the shape and its limits, the buckets every
// step issues, the host reference for tiny cases, the tolerances and the declared work. Host-only, no CUDA:
// the CPU tests (cpu_test_overlap.cpp) check all of it; problem.hpp and the steps use it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/sum_tolerance.hpp"
#include "chapters/ch04_multi_gpu/common/phase.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::overlap {

// ---- what a launch runs (axis `phase`) ---------------------------------------------------------------

inline constexpr const char* k_phase_help =
    "what one launch runs: 0 the backward pass as the step schedules it (GEMMs and all-reduces), 1 its GEMMs "
    "only, 2 its all-reduces only (the same buckets); exposed communication = t(0) - t(1)";

// The axis value (common/phase.hpp: compute = the GEMMs, comms = the all-reduces).
inline Phase phase_from_axis(std::int64_t phase) { return ch04::phase_from_axis(phase, "ch04:overlap", k_phase_help); }

// Step 05's default: the SMs its GEMMs leave to NCCL (axis sm_margin). NCCL runs one block per channel, and
// its all-reduce between two NVLink-connected GPUs typically opens 16 to 32 channels; 16 of an H200's 132
// SMs is the smaller end (README, "Steps").
inline constexpr int k_default_sm_margin = 16;

// The axis value, checked against the GPU: the GEMMs must keep at least one SM.
inline int sm_margin_from_axis(std::int64_t margin, int sm_count) {
  if (margin < 1 || margin >= sm_count) {
    throw UsageError("ch04:overlap: sm_margin " + std::to_string(margin) + " must leave the GEMMs 1 to " +
                     std::to_string(sm_count - 1) + " of the GPU's " + std::to_string(sm_count) + " SMs");
  }
  return static_cast<int>(margin);
}

// ---- the backward pass's shape -----------------------------------------------------------------------

// L layers, each y = x W^T with W hidden x hidden; backward gives each one weight gradient
// dW_l = dY_l^T X_l (hidden x hidden) over `tokens` rows of X_l and dY_l (tokens x hidden each).
struct Shape {
  int layers = 0;
  int hidden = 0;
  int tokens = 0;

  std::size_t layer_elements() const { return static_cast<std::size_t>(hidden) * hidden; }  // one dW
  std::size_t gradient_elements() const { return layers * layer_elements(); }              // every dW
  std::size_t activation_elements() const {  // X (or dY) of every layer
    return static_cast<std::size_t>(layers) * tokens * hidden;
  }
  std::size_t layer_bytes() const { return layer_elements() * sizeof(float); }  // fp32 gradients
  std::size_t gradient_bytes() const { return gradient_elements() * sizeof(float); }
  double flops() const { return 2.0 * layers * static_cast<double>(hidden) * hidden * tokens; }
};

// UsageError unless every size is positive and hidden and tokens are multiples of 16: every layer's slice
// of X, dY (bf16) and dW (fp32) then starts on a 256-byte boundary, the alignment cuBLASLt's heuristic
// assumes of its operands unless told less (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and every row on
// a 32-byte one.
inline Shape make_shape(std::int64_t layers, std::int64_t hidden, std::int64_t tokens) {
  const auto check = [](const char* name, std::int64_t v, std::int64_t multiple) {
    if (v < 1 || v % multiple != 0 || v > std::numeric_limits<int>::max()) {
      const std::string want = multiple > 1 ? "a positive multiple of " + std::to_string(multiple) +
                                                  " (256-byte aligned slices for cuBLASLt)"
                                            : std::string("a positive integer");
      throw UsageError("ch04:overlap: " + std::string(name) + "=" + std::to_string(v) + ": " + want +
                       " no larger than 2^31 - 1");
    }
  };
  check("layers", layers, 1);
  check("hidden", hidden, 16);
  check("tokens", tokens, 16);
  return {static_cast<int>(layers), static_cast<int>(hidden), static_cast<int>(tokens)};
}

// ---- buckets -----------------------------------------------------------------------------------------

// Layers first_layer .. first_layer + layers - 1: contiguous in the gradient buffer (layer l at
// l x hidden^2), so one all-reduce covers them. Backward produces the highest layer first; the bucket is
// ready when first_layer's GEMM is done.
struct Bucket {
  int first_layer = 0;
  int layers = 0;
  bool operator==(const Bucket&) const = default;
};

// PyTorch DDP's first bucket limit (torch/csrc/distributed/c10d/reducer.hpp, kDefaultFirstBucketBytes):
// a small first bucket, so that the first all-reduce starts as soon as possible.
inline constexpr std::size_t k_first_bucket_bytes = std::size_t{1} << 20;
inline constexpr std::size_t k_mib = std::size_t{1} << 20;  // bucket_mb counts these, as DDP's bucket_cap_mb

// The buckets DDP forms (reducer.cpp, compute_bucket_assignment_by_size, with the limits its bucket rebuild
// uses: {first_cap, cap}): gradients in the order backward produces them (layer L - 1 first) join the open
// bucket, which closes as soon as its size reaches its limit (>=): first_cap for the first bucket, cap for
// every later one; what is left at the end is the last bucket. So a bucket passes its limit by less than one
// layer, a layer larger than the limit is a bucket of its own, and a cap larger than everything leaves one
// bucket after the first. In issue order.
inline std::vector<Bucket> assign_buckets(int layers, std::size_t layer_bytes, std::size_t cap_bytes,
                                          std::size_t first_cap_bytes = k_first_bucket_bytes) {
  std::vector<Bucket> buckets;
  std::size_t size = 0;
  int top = layers - 1;  // the open bucket's highest layer
  for (int l = layers - 1; l >= 0; --l) {
    size += layer_bytes;
    if (size >= (buckets.empty() ? first_cap_bytes : cap_bytes)) {
      buckets.push_back({l, top - l + 1});
      size = 0;
      top = l - 1;
    }
  }
  if (top >= 0) buckets.push_back({0, top + 1});
  return buckets;
}

// The `bucket_mb` axis in bytes; UsageError outside 1 MiB .. 1 TiB.
inline std::size_t bucket_bytes_from_mb(std::int64_t mb) {
  if (mb < 1 || mb > (std::int64_t{1} << 20)) {
    throw UsageError("ch04:overlap: bucket_mb=" + std::to_string(mb) + ": 1 to 1048576 (MiB, as DDP's bucket_cap_mb)");
  }
  return static_cast<std::size_t>(mb) * k_mib;
}

// One bucket per layer, in backward order: 02's schedule.
inline std::vector<Bucket> per_layer_buckets(int layers) {
  std::vector<Bucket> buckets;
  for (int l = layers - 1; l >= 0; --l) buckets.push_back({l, 1});
  return buckets;
}

// ---- the host reference (tiny cases: the CPU tests, check_reference_on_host) --------------------------

// dW[i][j] = sum over t of dy[t][i] x[t][j]: dy and x tokens x hidden, dW hidden x hidden, all row-major
// (i the output feature, j the input feature, as PyTorch's Linear.weight.grad). In fp64: exact for bf16
// inputs up to fp64's own rounding.
inline std::vector<double> host_weight_grad(std::span<const double> dy, std::span<const double> x, int tokens,
                                            int hidden) {
  const auto h = static_cast<std::size_t>(hidden);
  std::vector<double> dw(h * h, 0.0);
  for (std::size_t t = 0; t < static_cast<std::size_t>(tokens); ++t) {
    for (std::size_t i = 0; i < h; ++i) {
      const double g = dy[t * h + i];
      for (std::size_t j = 0; j < h; ++j) dw[i * h + j] += g * x[t * h + j];
    }
  }
  return dw;
}

// Every layer's weight gradient of one rank from its dY and X (layer l's rows at l x tokens x hidden), in
// the gradient buffer's layout (layer l at l x hidden^2).
inline std::vector<double> host_local_grads(const std::vector<double>& dy, const std::vector<double>& x,
                                            const Shape& s) {
  const std::size_t rows = static_cast<std::size_t>(s.tokens) * s.hidden;
  std::vector<double> grads;
  grads.reserve(s.gradient_elements());
  for (int l = 0; l < s.layers; ++l) {
    const std::span<const double> dy_l(dy.data() + l * rows, rows), x_l(x.data() + l * rows, rows);
    const auto dw = host_weight_grad(dy_l, x_l, s.tokens, s.hidden);
    grads.insert(grads.end(), dw.begin(), dw.end());
  }
  return grads;
}

// out[i] = the sum over ranks of terms[r][i] (the all-reduce's result on every rank).
inline std::vector<double> host_rank_sum(const std::vector<std::vector<double>>& terms) {
  if (terms.empty()) return {};
  std::vector<double> out = terms.front();
  for (std::size_t r = 1; r < terms.size(); ++r) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += terms[r][i];
  }
  return out;
}

// ---- tolerances --------------------------------------------------------------------------------------
//
// A gradient element is g = sum over t of dy[t][i] x[t][j]: `tokens` = T products of bf16 values in
// [-1, 1], each exact in fp32 (8 + 8 significant bits) and at most 1 in magnitude, so |g| <= T <= 2^k,
// k = ceil(log2 T) (grad_bound). Two sources of difference from the gate's reference:
//
// 1. The GEMM's fp32 accumulation order. The gate's reference runs the same cuBLASLt plan as the steps
//    (WgradGemm, same shape, same kind of GPU), which computes each element in the same order: bit for bit
//    the same in practice. The allowance covers a different algorithm choice (split K, another tile): two
//    orders of T roundings of half an ulp of partial sums of typical size sqrt(T / 9) differ by a random
//    walk of about T 2^-24 / 3 (ch10:hgemm's estimate), ~6 times that in the tail of 10^8 elements;
//    gemm_order_atol = 16 T 2^-24 is 48 and 8 times those. A worst-case bound would be ~T^2 2^-24 (2.0 at
//    T = 4096, GEMM rounding that truncates), too loose to tell an fp32 gradient from a bf16 one.
// 2. The sum over R ranks, which NCCL adds in its ring's order: R terms below 2^k, two orders of R - 1
//    round-to-nearest additions, common/sum_tolerance.hpp's bound scaled by 2^k (rigorous).
//
// Each rank's term may carry its GEMM's difference, hence R x the GEMM allowance.

inline int ceil_log2(double v) { return static_cast<int>(std::ceil(std::log2(v))); }

// The largest a gradient element can be: T products of magnitude <= 1, rounded up to a power of two.
inline double grad_bound(int tokens) { return std::ldexp(1.0, ceil_log2(tokens)); }

// Two fp32 accumulations of one element by (possibly) different cuBLASLt algorithms (1. above).
inline double gemm_order_atol(int tokens) { return 16.0 * tokens * 0x1p-24; }

// One fp32 accumulation against the exact sum, in the worst case with every addition allowed to round
// toward zero (tensor cores truncate: Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA
// tensor cores", PeerJ CS 2021): T - 1 additions of less than one ulp at 2^k, (T - 1) 2^(k-24), the same
// number as fp32_sum_atol(T); typical partial sums, ~sqrt(T / 9), are far below 2^k. Used where the
// host's fp64 product is the reference (check_reference_on_host).
inline double gemm_exact_atol(int tokens) { return fp32_sum_atol(tokens); }

// A sum over `ranks` of terms below `term_bound` in magnitude, each within `term_error` of the reference's
// own term, added in an order the reference does not know (2. above).
inline double rank_sum_atol(int ranks, double term_bound, double term_error) {
  return ranks * term_error + fp32_sum_atol(ranks) * term_bound;
}

// The atol of a phase's outputs when each GEMM may differ from the reference's by `gemm_error`: the step's
// outputs are the local gradients (a sum over one rank) and the reduced ones (over R; the larger bound,
// which covers both); the GEMMs' outputs are the local gradients; the all-reduces' inputs are fp32
// stand-ins in [-1, 1], so their sum's bound is fp32_sum_atol itself.
inline double phase_atol(Phase p, int ranks, int tokens, double gemm_error) {
  switch (p) {
    case Phase::step: return rank_sum_atol(ranks, grad_bound(tokens), gemm_error);
    case Phase::compute: return gemm_error;
    case Phase::comms: return rank_sum_atol(ranks, 1.0, 0.0);
  }
  return 0.0;
}

// The gate's: the steps' GEMMs against the reference's (the same plan).
inline double gate_atol(Phase p, int ranks, int tokens) {
  return phase_atol(p, ranks, tokens, gemm_order_atol(tokens));
}

// The device reference against the host's fp64 (check_reference_on_host): each GEMM bounded rigorously
// against the exact product.
inline double host_check_atol(Phase p, int ranks, int tokens) {
  return phase_atol(p, ranks, tokens, gemm_exact_atol(tokens));
}

// ---- declared work -----------------------------------------------------------------------------------

// nccl-tests' bus bytes of all-reducing every gradient over `ranks` (common/bus_bandwidth.hpp): the same
// for one flat all-reduce and for any buckets, whose sizes add up to the gradients'.
inline double all_reduce_bus_bytes(const Shape& s, int ranks) {
  return bus_bytes(Collective::all_reduce, ranks, static_cast<double>(s.gradient_bytes()));
}

}  // namespace aisp::ch04::overlap
