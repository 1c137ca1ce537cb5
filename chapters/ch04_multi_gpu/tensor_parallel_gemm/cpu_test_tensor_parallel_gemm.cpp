// ch04:tensor_parallel_gemm — checked on the host: the axes' validation; the weights' slicing over ranks (a
// hand-worked case, the round trip, and the column-then-row identity: the ranks' partials add up to the
// unsliced MLP, while a split that ignores the GELU does not); the tokens' placement over ranks and chunks
// (the all-gather, GEMM and reduce-scatter offsets of 02 and 03 replayed on token ids: every rank ends with
// its own tokens in order); the host reference on a case worked out by hand (which pins the GELU's tanh form
// and W2's orientation); bf16 rounding; the tolerances (values, that real accumulation orders and bf16
// collectives stay inside them, that structural mistakes do not); the declared FLOPs and bus bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/reference.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::tensor_parallel_gemm {
namespace {

constexpr double MiB = 1024.0 * 1024.0;

// ---- axes ----

TEST(Ch04TensorParallelAxes, PhasesAndWhatTheyRun) {
  EXPECT_EQ(phase_from_axis(0), Phase::step);
  EXPECT_EQ(phase_from_axis(1), Phase::compute);
  EXPECT_EQ(phase_from_axis(2), Phase::comms);
  EXPECT_THROW(phase_from_axis(3), UsageError);
  EXPECT_THROW(phase_from_axis(-1), UsageError);
  EXPECT_TRUE(runs_compute(Phase::step) && runs_comms(Phase::step));
  EXPECT_TRUE(runs_compute(Phase::compute) && !runs_comms(Phase::compute));
  EXPECT_TRUE(!runs_compute(Phase::comms) && runs_comms(Phase::comms));
}

TEST(Ch04TensorParallelAxes, ShapeOfTheDefaults) {
  const Shape s = make_shape(4096, 4096, 16384, 2, 4);
  EXPECT_EQ(s.ffn_per_rank(), 8192);
  EXPECT_EQ(s.tokens_per_rank(), 2048);
  EXPECT_EQ(s.chunk_tokens(4), 1024);
  EXPECT_EQ(s.piece_tokens(4), 512);
  EXPECT_EQ(s.chunk_tokens(1), 4096);  // 02: one chunk
  EXPECT_EQ(s.piece_tokens(1), 2048);
  EXPECT_DOUBLE_EQ(s.activation_elements() * 2 / MiB, 32.0);  // X, a partial, Y: 32 MiB of bf16
  EXPECT_DOUBLE_EQ(s.weight_elements() * 2 / MiB, 64.0);      // W1_r, W2_r: 64 MiB each
  EXPECT_EQ(s.own_elements(), 2048u * 4096u);
}

// UsageError whose message contains `hint`.
void expect_usage(std::int64_t tokens, std::int64_t hidden, std::int64_t ffn, std::int64_t ranks, std::int64_t chunks,
                  const std::string& hint) {
  try {
    make_shape(tokens, hidden, ffn, ranks, chunks);
    ADD_FAILURE() << "no UsageError for " << tokens << " " << hidden << " " << ffn << " " << ranks << " " << chunks;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(hint), std::string::npos) << e.what();
  }
}

TEST(Ch04TensorParallelAxes, ShapeLimitsSayWhatToDo) {
  EXPECT_NO_THROW(make_shape(64, 64, 128, 2, 4));
  EXPECT_NO_THROW(make_shape(8, 64, 64, 1, 1));  // the smallest shape
  // ffn must split into slices of a multiple of 64 per rank.
  expect_usage(4096, 4096, 16320, 2, 4, "a multiple of 128 (64 x ranks)");  // 255 x 64
  expect_usage(4096, 4096, 16384, 3, 4, "a multiple of 192 (64 x ranks)");  // 16384 is no multiple of 3
  expect_usage(4096, 4096, 16384 + 64, 8, 4, "a multiple of 512 (64 x ranks)");
  EXPECT_NO_THROW(make_shape(4096, 4096, 16384 + 64, 1, 4));                 // one rank: 64 is enough
  expect_usage(4096, 4096, 0, 2, 4, "ffn=0");
  // tokens must split into ranks x chunks pieces of a multiple of 8.
  expect_usage(4000, 4096, 16384, 2, 4, "a multiple of 64 (8 x ranks x chunks)");
  expect_usage(4096, 4096, 16384, 2, 3, "a multiple of 48 (8 x ranks x chunks)");
  expect_usage(4096, 4096, 16384, 8, 128, "a multiple of 8192 (8 x ranks x chunks)");
  EXPECT_NO_THROW(make_shape(4096, 4096, 16384, 8, 64));
  expect_usage(4096, 4100, 16384, 2, 4, "hidden=4100: a positive multiple of 64");
  expect_usage(4096, 0, 16384, 2, 4, "hidden=0");
  expect_usage(4096, std::int64_t{1} << 32, 16384, 2, 4, "2^31 - 1");
  expect_usage(4096, 4096, 16384, 2, 0, "chunks=0");
  expect_usage(4096, 4096, 16384, 9, 4, "1 to 8 ranks");
  expect_usage(4096, 4096, 16384, 0, 4, "1 to 8 ranks");
  // The harness's path refuses one rank (common/ranks.hpp); the GPU test builds its problem around it.
  EXPECT_THROW(rank_devices(1, 2, 0, k_ladder), UsageError);
  EXPECT_EQ(rank_devices(0, 2, 1, k_ladder), (std::vector<int>{1, 0}));
}

// ---- the weights over ranks ----

std::vector<double> iota(std::size_t n, double from = 0) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(Ch04TensorParallelSlices, RowsOfW1AndColumnsOfW2) {
  // hidden = 2, ffn = 4 over 2 ranks (f = 2). W1 (4 x 2) = rows [0 1] [2 3] [4 5] [6 7]; W2 (2 x 4) = rows
  // [0 1 2 3] [4 5 6 7].
  const Shape s{.tokens = 8, .hidden = 2, .ffn = 4, .ranks = 2, .chunks = 1};
  const auto w1 = iota(8), w2 = iota(8);
  EXPECT_EQ(w1_slice(w1, s, 0), (std::vector<double>{0, 1, 2, 3}));  // W1 rows 0, 1
  EXPECT_EQ(w1_slice(w1, s, 1), (std::vector<double>{4, 5, 6, 7}));  // rows 2, 3
  EXPECT_EQ(w2_slice(w2, s, 0), (std::vector<double>{0, 1, 4, 5}));  // W2 columns 0, 1 (hidden x f)
  EXPECT_EQ(w2_slice(w2, s, 1), (std::vector<double>{2, 3, 6, 7}));  // columns 2, 3
  EXPECT_EQ(w1_from_slices({w1_slice(w1, s, 0), w1_slice(w1, s, 1)}), w1);
  EXPECT_EQ(w2_from_slices({w2_slice(w2, s, 0), w2_slice(w2, s, 1)}, s), w2);
}

std::vector<double> uniform(std::size_t n, double scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = round_bf16(u(rng));
  return v;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST(Ch04TensorParallelSlices, PartialsAddUpToTheUnslicedMlp) {
  std::mt19937_64 rng(5);
  for (const int ranks : {1, 2, 4, 8}) {
    const Shape s{.tokens = 16, .hidden = 32, .ffn = 64 * ranks, .ranks = ranks, .chunks = 1};
    const auto x = uniform(s.activation_elements(), 1.0, rng);
    const auto w1 = uniform(static_cast<std::size_t>(s.ffn) * s.hidden, w1_scale(s.hidden), rng);
    const auto w2 = uniform(static_cast<std::size_t>(s.hidden) * s.ffn, w2_scale(s.ffn), rng);
    const auto y = host_mlp(x, w1, w2, s.tokens, s.hidden, s.ffn);
    std::vector<std::vector<double>> partials;
    for (int r = 0; r < ranks; ++r) {
      partials.push_back(host_partial(x, w1_slice(w1, s, r), w2_slice(w2, s, r), s, false));
    }
    EXPECT_LT(max_abs_diff(host_rank_sum(partials, false), y), 1e-12) << ranks << " ranks";
    if (ranks == 1) continue;
    // Row-parallel first (each rank a slice of hidden, GELU on its partial of H): not the MLP, because the
    // GELU is not additive. This is why the first GEMM must be the column-parallel one.
    std::vector<double> wrong(y.size(), 0.0);
    const int k = s.hidden / ranks;
    // Columns [r k, (r + 1) k) of a matrix with `cols` columns and `rows` rows.
    const auto columns = [&](const std::vector<double>& m, int rows, int cols, int r) {
      std::vector<double> out;
      for (int i = 0; i < rows; ++i) {
        out.insert(out.end(), m.begin() + i * cols + r * k, m.begin() + i * cols + (r + 1) * k);
      }
      return out;
    };
    for (int r = 0; r < ranks; ++r) {
      const auto x_r = columns(x, s.tokens, s.hidden, r), w1_r = columns(w1, s.ffn, s.hidden, r);
      const auto p = host_mlp(x_r, w1_r, w2, s.tokens, k, s.ffn);
      for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] += p[i];
    }
    EXPECT_GT(max_abs_diff(wrong, y), 0.1) << ranks << " ranks";
  }
}

// ---- the tokens over ranks and chunks ----

// Replays one sequence-parallel step's collectives on token ids (chunks = 1: 02; s.chunks: 03), with the
// offsets the steps pass to NCCL: X's rows hold their token; in chunk c's all-gather rank src sends its rows
// at gather_send, and every rank receives them at gather_recv + src P (NCCL's all-gather places rank src's
// send buffer at src x count); the GEMMs keep a row's token (they are row-wise); the chunk's reduce-scatter
// hands row block dst of the partial from scatter_send on to rank dst, at its scatter_recv. Returns each
// rank's rows of Y as token ids (-1 where nothing landed).
std::vector<std::vector<long>> replay(const Shape& s, int chunks) {
  const std::size_t T = s.tokens, R = s.ranks;
  std::vector<std::vector<long>> gathered(R, std::vector<long>(T, -1)), y(R, std::vector<long>(T, -1));
  for (int c = 0; c < chunks; ++c) {
    for (std::size_t dst = 0; dst < R; ++dst) {
      for (std::size_t src = 0; src < R; ++src) {  // all-gather of chunk c: rank src's piece, on rank dst
        const ChunkRows from = chunk_rows(s, chunks, static_cast<int>(src), c);
        const ChunkRows to = chunk_rows(s, chunks, static_cast<int>(dst), c);
        EXPECT_EQ(to.gather_recv, from.gather_recv);  // every rank gathers chunk c to the same rows
        for (std::size_t i = 0; i < from.rows; ++i) {
          gathered[dst][to.gather_recv + src * from.rows + i] = static_cast<long>(from.gather_send + i);
        }
      }
    }
    for (std::size_t dst = 0; dst < R; ++dst) {  // reduce-scatter of chunk c: block dst of every rank's partial
      const ChunkRows to = chunk_rows(s, chunks, static_cast<int>(dst), c);
      for (std::size_t src = 0; src < R; ++src) {
        const ChunkRows from = chunk_rows(s, chunks, static_cast<int>(src), c);
        EXPECT_EQ(from.scatter_send, from.gather_recv);  // the GEMMs write the partial where they read X
        for (std::size_t i = 0; i < to.rows; ++i) {
          const long token = gathered[src][from.scatter_send + dst * to.rows + i];
          long& landed = y[dst][to.scatter_recv + i];
          EXPECT_TRUE(landed == -1 || landed == token) << "ranks disagree on a row's token";
          landed = token;
        }
      }
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t row = 0; row < T; ++row) {
      EXPECT_EQ(gathered[r][row], static_cast<long>(gathered_token(s, chunks, row))) << "rank " << r << " row " << row;
    }
  }
  return y;
}

TEST(Ch04TensorParallelTokens, EveryRankEndsWithItsOwnTokensInOrder) {
  for (const int ranks : {1, 2, 3, 4, 8}) {
    for (const int chunks : {1, 2, 4, 8}) {
      const Shape s = make_shape(8 * ranks * chunks * 2, 64, 64 * ranks, ranks, chunks);
      for (const int c : {1, chunks}) {
        const auto y = replay(s, c);
        for (int r = 0; r < ranks; ++r) {
          for (std::size_t row = 0; row < static_cast<std::size_t>(s.tokens); ++row) {
            const bool own = row >= own_token(s, r) && row < own_token(s, r) + s.tokens_per_rank();
            // Its own rows hold its own tokens, in place; nothing else lands on it.
            EXPECT_EQ(y[r][row], own ? static_cast<long>(row) : -1)
                << ranks << " ranks, " << c << " chunks, rank " << r;
          }
        }
      }
    }
  }
}

TEST(Ch04TensorParallelTokens, TheDefaultsChunksByHand) {
  // 2 ranks, 4 chunks, 4096 tokens: P = 512. Rank 1's piece 2 is tokens 2048 + 1024 = 3072 ...; chunk 2's
  // rows in the gathered X are 2048 .. 3071, rank 0's piece 2 (tokens 1024 ..) first, then rank 1's (3072 ..).
  const Shape s = make_shape(4096, 4096, 16384, 2, 4);
  const ChunkRows r1c2 = chunk_rows(s, 4, 1, 2);
  EXPECT_EQ(r1c2.gather_send, 3072u);
  EXPECT_EQ(r1c2.gather_recv, 2048u);
  EXPECT_EQ(r1c2.scatter_send, 2048u);
  EXPECT_EQ(r1c2.scatter_recv, 3072u);
  EXPECT_EQ(r1c2.rows, 512u);
  EXPECT_EQ(gathered_token(s, 4, 2048), 1024u);        // chunk 2, rank 0's piece, first row
  EXPECT_EQ(gathered_token(s, 4, 2048 + 511), 1535u);
  EXPECT_EQ(gathered_token(s, 4, 2048 + 512), 3072u);  // chunk 2, rank 1's piece
  // 02 (one chunk): rank 1 sends its 2048 tokens, receives Y's rows 2048 .. 4095, all in token order.
  const ChunkRows one = chunk_rows(s, 1, 1, 0);
  EXPECT_EQ(one.gather_send, 2048u);
  EXPECT_EQ(one.gather_recv, 0u);
  EXPECT_EQ(one.scatter_recv, 2048u);
  EXPECT_EQ(one.rows, 2048u);
  for (const std::size_t row : {0ul, 1ul, 2047ul, 2048ul, 4095ul}) EXPECT_EQ(gathered_token(s, 1, row), row);
}

// ---- the host reference ----

TEST(Ch04TensorParallelReference, Bf16Rounding) {
  EXPECT_EQ(round_bf16(1.0), 1.0);
  EXPECT_EQ(round_bf16(1.0 + 0x1p-8), 1.0);                  // a tie: to even (1.0)
  EXPECT_EQ(round_bf16(1.0 + 3 * 0x1p-8), 1.0 + 0x1p-6);     // a tie: to even (1 + 2 ulps)
  EXPECT_EQ(round_bf16(1.0 + 0x1p-8 + 0x1p-20), 1.0 + 0x1p-7);  // past the tie: up
  EXPECT_EQ(round_bf16(-255.9), -256.0);                      // carries into the next binade
  EXPECT_EQ(round_bf16(0.0), 0.0);
  EXPECT_EQ(bf16_ulp(1.0), 0x1p-7);
  EXPECT_EQ(bf16_ulp(7.3), 0x1p-5);
  EXPECT_EQ(bf16_ulp(-0.75), 0x1p-8);
}

TEST(Ch04TensorParallelReference, GeluIsTheTanhForm) {
  EXPECT_EQ(gelu_tanh(0.0), 0.0);
  EXPECT_NEAR(gelu_tanh(1.0), 0.8411920, 1e-7);
  EXPECT_NEAR(gelu_tanh(-1.0), -0.1588080, 1e-7);
  EXPECT_NEAR(gelu_tanh(2.0), 1.9545977, 1e-7);
  // Not the erf form (x Phi(x) = 0.8413447 at 1): the kernel and the host agree on the tanh one.
  EXPECT_GT(std::abs(gelu_tanh(1.0) - 0.8413447), 1e-4);
  // |GELU(h)| <= |h|, which bounds the partials (reference.hpp), and E[GELU(h)^2] = 0.425 for a unit normal.
  double second_moment = 0;
  for (int i = -120000; i <= 120000; ++i) {
    const double h = i * 1e-4, g = gelu_tanh(h);
    EXPECT_LE(std::abs(g), std::abs(h) + 1e-15);
    second_moment += g * g * std::exp(-h * h / 2) / std::sqrt(2 * 3.14159265358979323846) * 1e-4;
  }
  EXPECT_NEAR(second_moment, 0.4252, 1e-3);
}

TEST(Ch04TensorParallelReference, TwoRanksWorkedByHand) {
  // tokens = hidden = ffn = 2 over 2 ranks (f = 1). X = [[1, 0], [1, 1]], W1 = [[1, -2], [0, 1]], so
  // H = X W1^T = [[1, 0], [-1, 1]] and G = [[g(1), 0], [g(-1), g(1)]], g(1) = 0.841192, g(-1) = -0.158808.
  // W2 = [[1, 2], [-1, 0.5]]: rank 0 holds W2's column 0 ([1, -1]), rank 1 its column 1 ([2, 0.5]).
  //   rank 0's partial: G[:, 0] x [1, -1]  = [[g(1), -g(1)], [g(-1), -g(-1)]]
  //   rank 1's partial: G[:, 1] x [2, 0.5] = [[0, 0], [2 g(1), 0.5 g(1)]]
  //   Y = [[0.841192, -0.841192], [1.523576, 0.579404]]
  const Shape s{.tokens = 2, .hidden = 2, .ffn = 2, .ranks = 2, .chunks = 1};
  const std::vector<double> x{1, 0, 1, 1}, w1{1, -2, 0, 1}, w2{1, 2, -1, 0.5};
  const double g1 = 0.8411920, gm1 = -0.1588080;
  const auto p0 = host_partial(x, w1_slice(w1, s, 0), w2_slice(w2, s, 0), s, false);
  const auto p1 = host_partial(x, w1_slice(w1, s, 1), w2_slice(w2, s, 1), s, false);
  const std::vector<double> want0{g1, -g1, gm1, -gm1}, want1{0, 0, 2 * g1, 0.5 * g1};
  EXPECT_LT(max_abs_diff(p0, want0), 1e-6);
  EXPECT_LT(max_abs_diff(p1, want1), 1e-6);
  const std::vector<double> y{0.841192, -0.841192, 1.523576, 0.579404};
  EXPECT_LT(max_abs_diff(host_rank_sum({p0, p1}, false), y), 1e-6);
  EXPECT_LT(max_abs_diff(host_mlp(x, w1, w2, 2, 2, 2), y), 1e-6);
  // With bf16 storage: G rounds (g(1) -> 215 x 2^-8 = 0.83984375, g(-1) -> -163 x 2^-10 = -0.1591796875),
  // the partials are exact multiples of those, and Y rounds once: Y[1][0] = bf16(-0.1591796875 + 1.6796875 =
  // 1.5205078125) = 195 x 2^-7 = 1.5234375, Y[1][1] = bf16(0.1591796875 + 0.419921875 = 0.5791015625) =
  // 148 x 2^-8 = 0.578125.
  const auto b0 = host_partial(x, w1_slice(w1, s, 0), w2_slice(w2, s, 0), s);
  const auto b1 = host_partial(x, w1_slice(w1, s, 1), w2_slice(w2, s, 1), s);
  EXPECT_EQ(b0, (std::vector<double>{0.83984375, -0.83984375, -0.1591796875, 0.1591796875}));
  EXPECT_EQ(b1, (std::vector<double>{0, 0, 1.6796875, 0.419921875}));
  EXPECT_EQ(host_rank_sum({b0, b1}), (std::vector<double>{0.83984375, -0.83984375, 1.5234375, 0.578125}));
  // Each rank's output is its own token's row.
  EXPECT_EQ(own_rows(host_rank_sum({b0, b1}), s, 1), (std::vector<double>{1.5234375, 0.578125}));
}

// ---- tolerances ----

TEST(Ch04TensorParallelTolerance, ValuesAtTheDefaults) {
  const Shape two = make_shape(4096, 4096, 16384, 2, 4);
  EXPECT_NEAR(partial_sigma(two), std::sqrt(1.5), 1e-12);  // 3 f / ffn = 3 / R
  EXPECT_DOUBLE_EQ(gemm_allowance(two), 1.5 * 0x1p-5);      // bound 7.3: ulp 2^-5
  const ToleranceBound step = gate_tolerance(Phase::step, two);
  EXPECT_DOUBLE_EQ(step.atol, 0.09375);  // two ranks' allowance; no intermediate bf16 sum
  EXPECT_DOUBLE_EQ(step.rtol, 0x1p-6);
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::compute, two).atol, 0.046875);
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::compute, two).rtol, 0.0);
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::comms, two).atol, 0.0);  // two bf16 values add as the reference does
  // 8 ranks: six intermediate bf16 sums of up to 7 partials (bound 6 sqrt(7) sqrt(3/8) = 9.7, ulp 2^-4).
  const Shape eight = make_shape(4096, 4096, 16384, 8, 4);
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::step, eight).atol, 8 * 1.5 * 0x1p-6 + 6 * 0.5 * 0x1p-4);
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::comms, eight).atol, 6 * 0.5 * 0x1p-5);  // sums below 7
  for (const int ranks : {1, 2, 4, 8}) {
    const Shape a = make_shape(4096, 4096, 16384, ranks, 1);
    EXPECT_LE(gate_tolerance(Phase::compute, a).atol, gate_tolerance(Phase::step, a).atol);
    EXPECT_LE(host_check_tolerance(Phase::step, a).atol, gate_tolerance(Phase::step, a).atol);
  }
  // One rank (the GPU test): the GEMM allowance alone, a partial's bound 6 sqrt(3) = 10.4.
  EXPECT_DOUBLE_EQ(gate_tolerance(Phase::step, make_shape(256, 64, 512, 1, 4)).atol, 1.5 * 0x1p-4);
}

// One rank's partial with fp32 accumulation in a given order (forward or reverse over K), bf16 stored where
// the GPU stores it: two cuBLASLt algorithms' worth of difference.
std::vector<double> partial_fp32(const std::vector<double>& x, const std::vector<double>& w1_r,
                                 const std::vector<double>& w2_r, const Shape& s, bool reverse) {
  const auto linear = [&](const std::vector<double>& a, const std::vector<double>& b, int m, int n, int k) {
    std::vector<double> c(static_cast<std::size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) {
          const int q = reverse ? k - 1 - l : l;
          sum += static_cast<float>(a[static_cast<std::size_t>(i) * k + q] * b[static_cast<std::size_t>(j) * k + q]);
        }
        c[static_cast<std::size_t>(i) * n + j] = round_bf16(sum);
      }
    }
    return c;
  };
  auto g = linear(x, w1_r, s.tokens, s.ffn_per_rank(), s.hidden);
  for (auto& v : g) v = round_bf16(static_cast<float>(gelu_tanh(v)));
  return linear(g, w2_r, s.tokens, s.hidden, s.ffn_per_rank());
}

// A bf16 collective: the terms added in `order`, every addition rounded to bf16 (NCCL's ring or tree).
double bf16_collective(const std::vector<double>& terms, const std::vector<int>& order) {
  double sum = terms[order[0]];
  for (std::size_t k = 1; k < order.size(); ++k) sum = round_bf16(sum + terms[order[k]]);
  return sum;
}

// The reference's: fp32, rank order, one rounding.
double reference_sum(const std::vector<double>& terms) {
  float sum = 0.0f;
  for (const double t : terms) sum += static_cast<float>(t);
  return round_bf16(sum);
}

bool within(double out, double ref, const ToleranceBound& t) {
  return std::abs(out - ref) <= t.atol + t.rtol * std::abs(ref);
}

TEST(Ch04TensorParallelTolerance, RealAccumulationOrdersAndCollectivesStayInside) {
  std::mt19937_64 rng(17);
  for (const int ranks : {1, 2, 4, 8}) {
    const Shape s{.tokens = 32, .hidden = 256, .ffn = 256 * ranks, .ranks = ranks, .chunks = 1};
    const auto x = uniform(s.activation_elements(), 1.0, rng);
    std::vector<std::vector<double>> forward(ranks), reverse(ranks);
    for (int r = 0; r < ranks; ++r) {
      const auto w1 = uniform(s.weight_elements(), w1_scale(s.hidden), rng);
      const auto w2 = uniform(s.weight_elements(), w2_scale(s.ffn), rng);
      forward[r] = partial_fp32(x, w1, w2, s, false);
      reverse[r] = partial_fp32(x, w1, w2, s, true);
      // The partials stay inside their bound, and their spread inside its upper bound.
      double sq = 0;
      for (const double v : forward[r]) {
        EXPECT_LT(std::abs(v), partial_bound(s));
        sq += v * v;
      }
      EXPECT_LT(std::sqrt(sq / forward[r].size()), partial_sigma(s));
      // Another accumulation order: within the per-rank GEMM allowance (phase 1's tolerance).
      EXPECT_LE(max_abs_diff(forward[r], reverse[r]), gate_tolerance(Phase::compute, s).atol) << ranks;
    }
    // Phase 0: the step's partials (another order) through bf16 collectives in several orders, against the
    // reference's partials summed in fp32.
    const ToleranceBound t = gate_tolerance(Phase::step, s);
    std::vector<int> order(ranks);
    std::iota(order.begin(), order.end(), 0);
    std::size_t checked = 0;
    for (int trial = 0; trial < 4; ++trial) {
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t i = 0; i < forward[0].size(); ++i) {
        std::vector<double> step(ranks), ref(ranks);
        for (int r = 0; r < ranks; ++r) {
          step[r] = reverse[r][i];
          ref[r] = forward[r][i];
        }
        EXPECT_TRUE(within(bf16_collective(step, order), reference_sum(ref), t)) << ranks << " ranks, element " << i;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 4 * s.activation_elements());
  }
}

TEST(Ch04TensorParallelTolerance, StandInSumsInAnyOrderStayInside) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const int ranks : {2, 3, 4, 8}) {
    const Shape s{.tokens = 8, .hidden = 64, .ffn = 64 * ranks, .ranks = ranks, .chunks = 1};
    const ToleranceBound t = gate_tolerance(Phase::comms, s);
    std::vector<int> order(ranks);
    std::iota(order.begin(), order.end(), 0);
    for (int i = 0; i < 50000; ++i) {
      std::vector<double> terms(ranks);
      for (auto& v : terms) v = round_bf16(u(rng));
      std::shuffle(order.begin(), order.end(), rng);
      EXPECT_TRUE(within(bf16_collective(terms, order), reference_sum(terms), t)) << ranks;
    }
  }
}

TEST(Ch04TensorParallelTolerance, StructuralMistakesFail) {
  // Real partials at two ranks: a token in the wrong row, a rank's partial missing, or one counted twice
  // move nearly every element past the tolerance.
  std::mt19937_64 rng(23);
  const Shape s{.tokens = 64, .hidden = 128, .ffn = 512, .ranks = 2, .chunks = 1};
  const auto x = uniform(s.activation_elements(), 1.0, rng);
  std::vector<std::vector<double>> p(2);
  for (int r = 0; r < 2; ++r) {
    p[r] = host_partial(x, uniform(s.weight_elements(), w1_scale(s.hidden), rng),
                        uniform(s.weight_elements(), w2_scale(s.ffn), rng), s);
  }
  const auto y = host_rank_sum(p);
  const ToleranceBound t = gate_tolerance(Phase::step, s);
  const std::size_t n = y.size(), h = s.hidden;
  std::size_t shifted = 0, missing = 0, doubled = 0;
  for (std::size_t i = 0; i < n; ++i) {
    shifted += !within(y[(i + h) % n], y[i], t);          // the next token's row
    missing += !within(round_bf16(p[0][i]), y[i], t);     // rank 1's partial left out
    doubled += !within(round_bf16(y[i] + p[1][i]), y[i], t);  // rank 1's partial added twice
  }
  EXPECT_GT(shifted, n * 8 / 10);
  EXPECT_GT(missing, n * 7 / 10);
  EXPECT_GT(doubled, n * 7 / 10);
}

// ---- declared work ----

TEST(Ch04TensorParallelWork, FlopsAndBusBytes) {
  const Shape s = make_shape(4096, 4096, 16384, 2, 4);
  EXPECT_DOUBLE_EQ(s.flops_per_rank(), 4.0 * 4096 * 4096 * 8192);  // 550 GFLOP a rank
  EXPECT_DOUBLE_EQ(activation_bytes(s), 32 * MiB);
  // All-reduce of 32 MiB over 2 ranks: 32 MiB x 2 (R - 1) / R = 32 MiB of bus bytes.
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(s), 32 * MiB);
  // Sequence parallelism moves the same: an all-gather and a reduce-scatter, (R - 1) / R each.
  for (const int ranks : {1, 2, 4, 8}) {
    const Shape r = make_shape(4096, 4096, 16384, ranks, 4);
    EXPECT_DOUBLE_EQ(sequence_parallel_bus_bytes(r), all_reduce_bus_bytes(r)) << ranks;
    // 03's chunks add up to it: each chunk's all-gather gathers T / C rows (nccl-tests' S, the gathered
    // buffer) and its reduce-scatter sends T / C rows.
    double chunked = 0;
    for (int c = 0; c < 4; ++c) {
      const double rows_bytes = 2.0 * r.chunk_tokens(4) * r.hidden;
      chunked += bus_bytes(Collective::all_gather, ranks, rows_bytes) +
                 bus_bytes(Collective::reduce_scatter, ranks, rows_bytes);
    }
    EXPECT_DOUBLE_EQ(chunked, all_reduce_bus_bytes(r)) << ranks;
  }
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(make_shape(4096, 4096, 16384, 1, 4)), 0.0);  // nothing crosses a link
  EXPECT_DOUBLE_EQ(all_reduce_bus_bytes(make_shape(4096, 4096, 16384, 8, 4)), 32 * MiB * 7 / 4);
  // The README's napkin math: ~0.79 ms of GEMMs at 700 TFLOP/s, ~0.096 ms of all-reduce at 350 GB/s; one
  // chunk's all-gather at the defaults moves 4 MiB of bus bytes (~0.012 ms); over 8 ranks, each rank's GEMMs
  // take a quarter as long and the bus bytes grow by 1.75.
  EXPECT_NEAR(s.flops_per_rank() / 700e12 * 1e3, 0.785, 0.001);
  EXPECT_NEAR(all_reduce_bus_bytes(s) / 350e9 * 1e3, 0.0959, 0.0001);
  EXPECT_DOUBLE_EQ(bus_bytes(Collective::all_gather, 2, 2.0 * s.chunk_tokens(4) * s.hidden), 4 * MiB);
  const Shape eight = make_shape(4096, 4096, 16384, 8, 4);
  EXPECT_NEAR(eight.flops_per_rank() / 700e12 * 1e3, 0.196, 0.001);
  EXPECT_NEAR(all_reduce_bus_bytes(eight) / 350e9 * 1e3, 0.168, 0.001);
}

}  // namespace
}  // namespace aisp::ch04::tensor_parallel_gemm
