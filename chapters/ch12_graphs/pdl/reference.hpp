// ch12:pdl — the host reference and the tolerance of the producer/consumer pair. Plain C++ (no CUDA
// headers) so that the CPU test can check both; problem.hpp uses them.
#pragma once

#include <cmath>

namespace aisp::ch12::pdl {

// The input ranges the problem draws: x in [-4, 4) covers SiLU's curved part; w in [0.5, 1.5) and
// b in [-0.5, 0.5) are a per-column scale and bias, as in an epilogue.
inline constexpr double k_x_lo = -4.0, k_x_hi = 4.0;
inline constexpr double k_w_lo = 0.5, k_w_hi = 1.5;
inline constexpr double k_b_lo = -0.5, k_b_hi = 0.5;

// The producer: y = silu(x) = x * sigmoid(x) = x / (1 + e^-x).
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The consumer: out = y * w[col] + b[col].
inline double scale_bias(double y, double w, double b) { return y * w + b; }

// The variants compute in fp32: y = x / (1 + expf(-x)) (expf within 2 ulps, CUDA programming guide,
// "Mathematical Functions"; the add and the IEEE division round once each), then fmaf(y, w, b). So y
// is within ~4 fp32 ulps of the exact value, relative; out inherits that error times |w| <= 1.5 plus
// one rounding. Near out = 0 (y w cancelling b) only the absolute error is meaningful: |y| < 4 and
// |w| < 1.5 bound it by 6 * 4 * 2^-24 ~ 1.4e-6. atol 1e-5 and rtol 1e-5 leave about 7x margin on both
// and are still far below any real mistake (a missing bias moves out by up to 0.5; reading y before the
// producer wrote it reads poison, NaN).
inline constexpr double k_atol = 1e-5;
inline constexpr double k_rtol = 1e-5;

}  // namespace aisp::ch12::pdl
