// ch04:tensor_parallel_gemm — the host side of the contract: the phases, the shape and its limits, how the
// weights are sliced over ranks and the tokens over ranks and chunks, the host reference for tiny cases,
// the tolerances and the declared work. Host-only, no CUDA: the CPU tests (cpu_test_tensor_parallel_gemm.cpp)
// check all of it; problem.hpp, the steps and the device reference use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/common/phase.hpp"
#include "chapters/ch04_multi_gpu/common/sum_tolerance.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::tensor_parallel_gemm {

inline constexpr const char* k_ladder = "ch04:tensor_parallel_gemm";

// ---- what a launch runs (axis `phase`) ---------------------------------------------------------------

inline constexpr const char* k_phase_help =
    "what one launch runs: 0 the MLP as the step schedules it (GEMMs, GELU and collectives), 1 its GEMMs and "
    "GELU only, 2 its collectives only (the same calls, on stand-ins); exposed communication = t(0) - t(1)";

// The axis value (common/phase.hpp: compute = the GEMMs and the GELU, comms = the collectives).
inline Phase phase_from_axis(std::int64_t phase) { return ch04::phase_from_axis(phase, k_ladder, k_phase_help); }

// ---- the shape -----------------------------------------------------------------------------------------

// Y = GELU(X W1^T) W2^T over `tokens` rows: X tokens x hidden, W1 ffn x hidden, W2 hidden x ffn (row-major,
// PyTorch's Linear.weight layout: out_features x in_features). Split over `ranks`: rank r holds W1's rows and
// W2's columns [r f, (r + 1) f), f = ffn / ranks (Megatron-LM's column- then row-parallel Linear). The
// sequence-parallel steps give rank r the tokens [r T / R, (r + 1) T / R), and 03 cuts those into `chunks`
// pieces of P = T / (R C) tokens.
struct Shape {
  int tokens = 0;
  int hidden = 0;
  int ffn = 0;
  int ranks = 1;
  int chunks = 1;

  int ffn_per_rank() const { return ffn / ranks; }                 // f
  int tokens_per_rank() const { return tokens / ranks; }           // T / R
  int chunk_tokens(int c) const { return tokens / c; }             // rows of one chunk of c
  int piece_tokens(int c) const { return tokens / (ranks * c); }   // one rank's share of a chunk of c
  std::size_t activation_elements() const { return static_cast<std::size_t>(tokens) * hidden; }  // X, Y
  std::size_t weight_elements() const { return static_cast<std::size_t>(ffn_per_rank()) * hidden; }  // W1_r, W2_r
  std::size_t own_elements() const { return static_cast<std::size_t>(tokens_per_rank()) * hidden; }
  // One rank's two GEMMs, 2 T hidden f FLOPs each (the GELU's are not counted: no tensor core runs them).
  double flops_per_rank() const { return 4.0 * tokens * static_cast<double>(hidden) * ffn_per_rank(); }
};

// UsageError unless every size fits and divides as the steps need. Every slice a step hands to cuBLASLt or
// NCCL then starts on a 256-byte boundary, the alignment cuBLASLt's heuristic assumes of its operands unless
// told less (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES): rows of hidden or f bf16 elements are multiples of
// 128 bytes, and every token offset is a multiple of 8 rows.
inline Shape make_shape(std::int64_t tokens, std::int64_t hidden, std::int64_t ffn, std::int64_t ranks,
                        std::int64_t chunks) {
  const std::string name(k_ladder);
  const std::int64_t int_max = std::numeric_limits<int>::max();
  if (ranks < 1 || ranks > k_max_ranks) {
    throw UsageError(name + ": 1 to " + std::to_string(k_max_ranks) + " ranks (one NVLink domain)");
  }
  if (chunks < 1 || chunks > 1024) {
    throw UsageError(name + ": chunks=" + std::to_string(chunks) + ": 1 to 1024 (03's pieces of each rank's tokens)");
  }
  if (hidden < 1 || hidden % 64 != 0 || hidden > int_max) {
    throw UsageError(name + ": hidden=" + std::to_string(hidden) +
                     ": a positive multiple of 64 (256-byte aligned rows for cuBLASLt) no larger than 2^31 - 1");
  }
  const std::int64_t ffn_multiple = 64 * ranks;
  if (ffn < 1 || ffn % ffn_multiple != 0 || ffn > int_max) {
    throw UsageError(name + ": ffn=" + std::to_string(ffn) + " over " + std::to_string(ranks) +
                     " rank(s): each rank holds ffn / ranks rows of W1 and columns of W2, a positive multiple of 64 "
                     "(cuBLASLt's 256-byte aligned operands), so ffn must be a multiple of " +
                     std::to_string(ffn_multiple) + " (64 x ranks) no larger than 2^31 - 1");
  }
  const std::int64_t token_multiple = 8 * ranks * chunks;
  if (tokens < 1 || tokens % token_multiple != 0 || tokens > int_max) {
    throw UsageError(name + ": tokens=" + std::to_string(tokens) + " over " + std::to_string(ranks) + " rank(s) x " +
                     std::to_string(chunks) + " chunk(s): each rank owns tokens / ranks tokens, cut into `chunks` "
                     "pieces of a positive multiple of 8, so tokens must be a multiple of " +
                     std::to_string(token_multiple) + " (8 x ranks x chunks) no larger than 2^31 - 1");
  }
  return {static_cast<int>(tokens), static_cast<int>(hidden), static_cast<int>(ffn), static_cast<int>(ranks),
          static_cast<int>(chunks)};
}

// ---- the weights over ranks ------------------------------------------------------------------------------

// Rank r's W1 (f x hidden): rows [r f, (r + 1) f) of the full W1, contiguous (a column-parallel Linear:
// each rank computes f whole columns of H = X W1^T, so the GELU, elementwise, needs nothing from the others).
inline std::vector<double> w1_slice(std::span<const double> w1, const Shape& s, int r) {
  const std::size_t n = s.weight_elements();
  return {w1.begin() + static_cast<std::ptrdiff_t>(r * n), w1.begin() + static_cast<std::ptrdiff_t>((r + 1) * n)};
}

// Rank r's W2 (hidden x f, row-major): columns [r f, (r + 1) f) of the full W2 (hidden x ffn), the matching
// slice of the input features (a row-parallel Linear: each rank's product is a partial sum of Y).
inline std::vector<double> w2_slice(std::span<const double> w2, const Shape& s, int r) {
  const auto f = static_cast<std::size_t>(s.ffn_per_rank()), ffn = static_cast<std::size_t>(s.ffn);
  std::vector<double> slice;
  slice.reserve(s.weight_elements());
  for (std::size_t h = 0; h < static_cast<std::size_t>(s.hidden); ++h) {
    const auto row = w2.begin() + static_cast<std::ptrdiff_t>(h * ffn + r * f);
    slice.insert(slice.end(), row, row + static_cast<std::ptrdiff_t>(f));
  }
  return slice;
}

// The full W1 and W2 from every rank's slice: what the problem's weights are (each rank generates its own).
inline std::vector<double> w1_from_slices(const std::vector<std::vector<double>>& slices) {
  std::vector<double> w1;
  for (const auto& s : slices) w1.insert(w1.end(), s.begin(), s.end());
  return w1;
}
inline std::vector<double> w2_from_slices(const std::vector<std::vector<double>>& slices, const Shape& s) {
  const auto f = static_cast<std::size_t>(s.ffn_per_rank());
  std::vector<double> w2;
  w2.reserve(static_cast<std::size_t>(s.hidden) * s.ffn);
  for (std::size_t h = 0; h < static_cast<std::size_t>(s.hidden); ++h) {
    for (const auto& slice : slices) {
      const auto row = slice.begin() + static_cast<std::ptrdiff_t>(h * f);
      w2.insert(w2.end(), row, row + static_cast<std::ptrdiff_t>(f));
    }
  }
  return w2;
}

// ---- the tokens over ranks and chunks (the sequence-parallel steps) ---------------------------------------

// The first token rank r owns: Megatron's sequence parallelism splits the sequence into R contiguous parts
// (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022, section 4.2.2).
// Rank r's rows of Y, tokens [own_token(r), own_token(r) + T / R), are its output in every step.
inline std::size_t own_token(const Shape& s, int r) { return static_cast<std::size_t>(r) * s.tokens_per_rank(); }

// One chunk's collectives when each rank's tokens are cut into `chunks` pieces (03; 02 is the single chunk
// of chunks = 1). Chunk c gathers piece c of every rank, rank j's at row j P of the chunk, so the chunk's
// rows are contiguous in the gathered X and in the partial the GEMMs write from it (rank-major, not token
// order: NCCL's all-gather places rank j's send buffer at j x count). Its reduce-scatter then hands row block
// j of the chunk's partial, summed over ranks, to rank j: exactly rank j's piece c, which lands in its Y at
// its tokens. In rows (tokens); multiply by hidden for elements.
struct ChunkRows {
  std::size_t gather_send = 0;   // rank r's piece c, in its X (tokens piece_token(r, c) ...)
  std::size_t gather_recv = 0;   // chunk c's first row in the gathered X, and in the partial
  std::size_t scatter_send = 0;  // chunk c's first row in the partial (= gather_recv)
  std::size_t scatter_recv = 0;  // rank r's piece c, in its Y (= gather_send)
  std::size_t rows = 0;          // P: the rows each rank sends (all-gather) and receives (reduce-scatter)
};

inline std::size_t piece_token(const Shape& s, int chunks, int r, int c) {
  return own_token(s, r) + static_cast<std::size_t>(c) * s.piece_tokens(chunks);
}

inline ChunkRows chunk_rows(const Shape& s, int chunks, int r, int c) {
  const std::size_t first = static_cast<std::size_t>(c) * s.chunk_tokens(chunks);
  return {.gather_send = piece_token(s, chunks, r, c),
          .gather_recv = first,
          .scatter_send = first,
          .scatter_recv = piece_token(s, chunks, r, c),
          .rows = static_cast<std::size_t>(s.piece_tokens(chunks))};
}

// The token held at `row` of the gathered X (and of the partial computed from it) under `chunks` chunks:
// row = c (T / C) + j P + i holds token piece_token(j, c) + i. The identity for chunks = 1.
inline std::size_t gathered_token(const Shape& s, int chunks, std::size_t row) {
  const auto chunk = static_cast<std::size_t>(s.chunk_tokens(chunks));
  const auto piece = static_cast<std::size_t>(s.piece_tokens(chunks));
  const std::size_t c = row / chunk, j = row % chunk / piece, i = row % piece;
  return piece_token(s, chunks, static_cast<int>(j), static_cast<int>(c)) + i;
}

// ---- the host reference (tiny cases: the CPU tests, check_reference_on_host) ------------------------------

// To bf16 (8 significant bits), to nearest, ties to even: what the GPU's __float2bfloat16_rn does to a value
// already in fp32 (from a double, the rare double rounding aside).
inline double round_bf16(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double ulp = std::ldexp(1.0, std::ilogb(v) - 7);
  return std::nearbyint(v / ulp) * ulp;  // the default rounding mode: to nearest even
}

// The spacing of bf16 values at |v| (v != 0): 2^(floor(log2 |v|) - 7).
inline double bf16_ulp(double v) { return std::ldexp(1.0, std::ilogb(v) - 7); }

// GELU's tanh form (Hendrycks and Gimpel, "Gaussian Error Linear Units", 2016), as GPT-2 and Megatron-LM's
// fused bias_gelu compute it: 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))).
inline double gelu_tanh(double h) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * h * (1.0 + std::tanh(k * (h + 0.044715 * h * h * h)));
}

// c = a b^T: a m x k, b n x k, c m x n, row-major (LtGemmTn's "TN" GEMM), in fp64.
inline std::vector<double> host_linear(std::span<const double> a, std::span<const double> b, int m, int n, int k) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(m); ++i) {
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
      double sum = 0;
      for (std::size_t l = 0; l < static_cast<std::size_t>(k); ++l) sum += a[i * k + l] * b[j * k + l];
      c[i * n + j] = sum;
    }
  }
  return c;
}

// One rank's partial of Y, GELU(X W1_r^T) W2_r^T (T x hidden), in fp64. `bf16_storage`: rounded to bf16
// where the GPU stores bf16 (H after GEMM1, G after the GELU, the partial after GEMM2), so that only the
// GPU's fp32 accumulation order separates the two; without it, exact up to fp64's own rounding.
inline std::vector<double> host_partial(std::span<const double> x, std::span<const double> w1_r,
                                        std::span<const double> w2_r, const Shape& s, bool bf16_storage = true) {
  const auto keep = [&](double v) { return bf16_storage ? round_bf16(v) : v; };
  auto g = host_linear(x, w1_r, s.tokens, s.ffn_per_rank(), s.hidden);
  for (auto& v : g) v = keep(gelu_tanh(keep(v)));
  auto p = host_linear(g, w2_r, s.tokens, s.hidden, s.ffn_per_rank());
  for (auto& v : p) v = keep(v);
  return p;
}

// Y = the sum over ranks of the partials, in rank order, rounded to bf16 once (`bf16_output`).
inline std::vector<double> host_rank_sum(const std::vector<std::vector<double>>& partials, bool bf16_output = true) {
  if (partials.empty()) return {};
  std::vector<double> y = partials.front();
  for (std::size_t r = 1; r < partials.size(); ++r) {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += partials[r][i];
  }
  if (bf16_output) {
    for (auto& v : y) v = round_bf16(v);
  }
  return y;
}

// The MLP on one device, unsliced (W1 ffn x hidden, W2 hidden x ffn), in fp64 with no rounding: what the
// sliced partials add up to (the CPU tests check it).
inline std::vector<double> host_mlp(std::span<const double> x, std::span<const double> w1, std::span<const double> w2,
                                    int tokens, int hidden, int ffn) {
  auto g = host_linear(x, w1, tokens, ffn, hidden);
  for (auto& v : g) v = gelu_tanh(v);
  return host_linear(g, w2, tokens, hidden, ffn);
}

// Rank r's rows of a tokens x hidden matrix: its output in every step.
inline std::vector<double> own_rows(std::span<const double> y, const Shape& s, int r) {
  const std::size_t at = own_token(s, r) * s.hidden;
  return {y.begin() + static_cast<std::ptrdiff_t>(at), y.begin() + static_cast<std::ptrdiff_t>(at + s.own_elements())};
}

// ---- inputs, and the sizes that follow from them ---------------------------------------------------------
//
// X is uniform in [-1, 1), W1 in [-a1, a1) with a1 = 3 / sqrt(hidden), W2 in [-a2, a2) with
// a2 = 3 / sqrt(ffn), all bf16: each element of H = X W1^T has variance hidden x (1/3) x (a1^2 / 3) = 1, so
// the GELU sees values where it is curved (not the near-ReLU it is at |h| >> 1), and Y has variance
// 3 E[GELU(h)^2] ~ 1.3 (E[GELU(h)^2] = 0.425 for a unit normal h), as a Transformer's initialization keeps it.
// A partial of Y sums f terms G W2: its variance is f E[g^2] a2^2 / 3 <= 3 f / ffn = 3 / R, since
// |GELU(h)| <= |h| and E[h^2] = 1 (partial_sigma, an upper bound). Partials and sums of them are sums of
// many independent terms, near-normal; no element of the ~10^8 a launch writes lies 6 such bounds out
// (the largest of 10^8 unit normals is ~6, and the bound is 1.5 x the real deviation).

inline double w1_scale(int hidden) { return 3.0 / std::sqrt(static_cast<double>(hidden)); }
inline double w2_scale(int ffn) { return 3.0 / std::sqrt(static_cast<double>(ffn)); }

inline constexpr double k_tail = 6.0;  // bounds, in (upper bounds of) standard deviations

inline double partial_sigma(const Shape& s) {
  const double a2 = w2_scale(s.ffn);
  return std::sqrt(s.ffn_per_rank() * a2 * a2 / 3.0);
}
inline double partial_bound(const Shape& s) { return k_tail * partial_sigma(s); }

// ---- tolerances ----------------------------------------------------------------------------------------
//
// Everything the steps store is bf16, as in Megatron-LM: H, the GELU's output G, each rank's partial of Y,
// and the collective's sum, which NCCL adds in bf16 (each addition rounded to bf16; that halves the bytes
// on the wire against fp32 partials, and is what Megatron-LM's all-reduce and reduce-scatter of a
// row-parallel Linear's output do). The gate's reference (device_reference.cu) runs the same cuBLASLt plan
// and GELU kernel per rank, then adds the bf16 partials in fp32 in rank order and rounds once. A step's
// output differs from it by:
//
// 1. Its GEMMs' fp32 accumulation order, where the step's GEMMs have another shape than the reference's and
//    cuBLASLt picks another algorithm (03's chunks of T / C rows; split K and stream K reorder the sum):
//    values 2^-24-relative apart round to different bf16 neighbours now and then, so a partial may be one
//    bf16 ulp off, plus what the H elements that rounded differently carry through the GELU and W2 (~10^-4
//    of them each one ulp off; their sum is a small fraction of an ulp of the partial). Allowed per rank:
//    1.5 ulp at the partial's bound (gemm_allowance).
// 2. The collective's order: NCCL adds the R partials in its ring's or tree's order, R - 1 bf16-rounded
//    additions of which the last is the output's rounding; the R - 2 before it each round a sum of at most
//    R - 1 partials, by at most half an ulp at that sum's bound (sum_order_allowance).
// 3. The final roundings, the step's and the reference's: half an ulp of the output each, 2^-8 |y| at most;
//    rtol 2^-6 is twice their sum, the rest covering the second-order terms (an ulp of a value that 1. and
//    2. moved).
// For R = 2 the collective adds two bf16 values once, as the reference does: only 1. and 3. remain, and
// for 01 and 02 (the reference's GEMM shapes) only 3.
//
// A structural mistake moves an element by about a partial's size or Y's (a token in the wrong row, a rank's
// partial left out or counted twice, an all-gather read before it landed): at the defaults ~1, against an
// atol of 0.094 at R = 2, so nearly every element it touches fails.

struct ToleranceBound {
  double atol = 0;
  double rtol = 0;
};

inline constexpr double k_final_rtol = 0x1p-6;

inline double gemm_allowance(const Shape& s) { return 1.5 * bf16_ulp(partial_bound(s)); }

// `terms_bound`: the bound of a sum of up to R - 1 terms.
inline double sum_order_allowance(int ranks, double terms_bound) {
  return ranks > 2 ? (ranks - 2) * 0.5 * bf16_ulp(terms_bound) : 0.0;
}

// The gate's: a step against the device reference. Phase 1's outputs are each rank's partial (1. only);
// phase 2's sum stand-ins in [-1, 1), so a sum of R - 1 of them is below R - 1 (2. and 3., rigorous).
inline ToleranceBound gate_tolerance(Phase p, const Shape& s) {
  const int R = s.ranks;
  switch (p) {
    case Phase::step:
      return {R * gemm_allowance(s) + sum_order_allowance(R, k_tail * std::sqrt(R - 1.0) * partial_sigma(s)),
              k_final_rtol};
    case Phase::compute: return {gemm_allowance(s), 0.0};
    case Phase::comms: return {sum_order_allowance(R, R - 1.0), k_final_rtol};
  }
  return {};
}

// The device reference against the host's emulation (check_reference_on_host): both store bf16 at the same
// points and add the partials in rank order (fp32 on the device, fp64 on the host): 1. for every rank
// (fp32 against exact accumulation, and the GELU's tanhf against tanh), then 3. For phase 2's stand-ins,
// 3. and the fp32 sum's own rounding, which matters only where the terms cancel to (nearly) nothing
// (common/sum_tolerance.hpp's bound for terms in [-1, 1)).
inline ToleranceBound host_check_tolerance(Phase p, const Shape& s) {
  switch (p) {
    case Phase::step: return {s.ranks * gemm_allowance(s), k_final_rtol};
    case Phase::compute: return {gemm_allowance(s), 0.0};
    case Phase::comms: return {fp32_sum_atol(s.ranks), k_final_rtol};
  }
  return {};
}

// ---- declared work ---------------------------------------------------------------------------------------

// nccl-tests' bus bytes (common/bus_bandwidth.hpp) of one step's communication: 01's all-reduce of Y's
// partials (bf16, T x hidden). The sequence-parallel steps' all-gather of X and reduce-scatter of the
// partials move the same (sequence_parallel_bus_bytes; Korthikanti et al.: an all-reduce is a
// reduce-scatter followed by an all-gather), and 03's chunks add up to it.
inline double activation_bytes(const Shape& s) { return 2.0 * static_cast<double>(s.activation_elements()); }

inline double all_reduce_bus_bytes(const Shape& s) {
  return bus_bytes(Collective::all_reduce, s.ranks, activation_bytes(s));
}

inline double sequence_parallel_bus_bytes(const Shape& s) {
  return bus_bytes(Collective::all_gather, s.ranks, activation_bytes(s)) +
         bus_bytes(Collective::reduce_scatter, s.ranks, activation_bytes(s));
}

}  // namespace aisp::ch04::tensor_parallel_gemm
