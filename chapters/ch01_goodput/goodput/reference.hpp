// ch01:goodput — the host reference and the tolerance of the training-loop ladder. Plain C++ (no CUDA
// headers) so that the CPU tests can check both; problem.hpp uses them.
//
// The "model" is an elementwise linear regression, enough to give every step a forward pass, a loss (a
// reduction to one scalar) and an update that depends on the step before:
//   r_i = w_i x_i - t_i,   loss = (1 / 2n) sum_i r_i^2,   w_i <- w_i - lr r_i x_i,
// from w = w0 at the start of every launch, for `steps` steps; the output is the loss of every step.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch01::goodput {

// The learning rate: with |x_i| < 1 the update multiplies r_i by (1 - lr x_i^2), in [0.5, 1]: each
// element's residual shrinks monotonically, so the losses fall step after step without diverging.
inline constexpr float k_learning_rate = 0.5f;

// The loss of each step, computed in double from the given inputs (each element's trajectory is its
// own: the update of w_i needs only w_i, x_i and t_i).
inline std::vector<double> training_losses_reference(const std::vector<double>& x,
                                                     const std::vector<double>& t,
                                                     const std::vector<double>& w0, int steps) {
  const std::size_t n = x.size();
  std::vector<double> w = w0, losses(static_cast<std::size_t>(steps), 0.0);
  for (int s = 0; s < steps; ++s) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double r = w[i] * x[i] - t[i];
      sum += r * r;
      w[i] -= static_cast<double>(k_learning_rate) * r * x[i];
    }
    losses[static_cast<std::size_t>(s)] = 0.5 * sum / static_cast<double>(n);
  }
  return losses;
}

// fp32's unit roundoff u = 2^-24.
inline constexpr double k_fp32_unit_roundoff = 1.0 / 16777216.0;

// The relative tolerance of every step's loss, fp32 trajectory against the double reference.
// Each step rounds r (one fused multiply-add), r x and the update (another fma). What matters is what
// each rounding does to r: |w_i x_i| stays below |w0_i x_i| + |t_i| <= 2 (w moves monotonically from
// w0 towards t / x), so a rounding of w moves r by at most 2u, a rounding of r by at most ~2u, and the
// update contracts old errors by (1 - lr x^2) <= 1: after s steps |delta r_i| <= ~9 s u at worst. The
// loss then moves by at most mean(|r_i| |delta r_i|) <= 9 s u mean|r|, against a loss of mean(r^2) / 2:
// with the residuals of uniform inputs (rms ~0.6, and the small-|x| elements barely converge)
// mean|r| / (mean(r^2) / 2) < ~4, so ~36 s u; the loss's own sum is accumulated in double and rounded
// to float once (u). rtol = 64 steps u, ~4e-4 at 100 steps: a skipped or repeated step moves the loss
// by more (cpu_test_goodput.cpp checks both). The worst-case analysis ignores that rounding errors of
// different elements cancel in the mean; the CPU test measures the real error far below it.
inline double loss_rtol(int steps) { return 64.0 * static_cast<double>(steps) * k_fp32_unit_roundoff; }

}  // namespace aisp::ch01::goodput
