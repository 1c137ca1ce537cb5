// ch11:stream_ordered_alloc — the step every variant runs, as host code: the reference the CPU tests and the
// GPU test check. Plain C++ (no CUDA headers); problem.hpp and the variants take their constants from here.
#pragma once

#include <cmath>

namespace aisp::ch11::stream_ordered_alloc {

// The step, per element: t1 = 1.5 x - 0.25 (an affine map), t2 = leaky_relu(t1) with slope 1/8, out = t2 x
// (a gate by the input). In the variants each line is its own small kernel with its own temporary, like a
// framework running one op at a time; here they are one function.
inline constexpr float k_scale = 1.5f;
inline constexpr float k_shift = -0.25f;
inline constexpr float k_slope = 0.125f;

inline float affine(float x) { return std::fma(k_scale, x, k_shift); }  // one rounding, like __fmaf_rn
inline float leaky_relu(float t) { return t > 0.0f ? t : k_slope * t; }  // times 1/8: exact
inline float gate(float t, float x) { return t * x; }

inline float step_reference(float x) { return gate(leaky_relu(affine(x)), x); }

}  // namespace aisp::ch11::stream_ordered_alloc
