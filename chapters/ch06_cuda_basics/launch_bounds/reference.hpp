// ch06:launch_bounds — the host reference: every pixel's 8 channels times one 8x8 matrix,
// y[p][r] = sum_c m[r][c] * x[p][c], summed over c = 0..7 in order with one fused multiply-add per term
// (std::fma on floats rounds exactly like the GPU's FFMA). Plain C++ (no CUDA).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace aisp::ch06::launch_bounds {

inline constexpr int k_channels = 8;

// x: pixels * 8 values, m: 64 values row-major; returns pixels * 8 values.
inline std::vector<double> mix_channels(const std::vector<double>& x, const std::vector<double>& m) {
  std::vector<double> y(x.size());
  for (std::size_t p = 0; p + k_channels <= x.size(); p += k_channels) {
    for (int r = 0; r < k_channels; ++r) {
      float acc = 0.0f;
      for (int c = 0; c < k_channels; ++c) {
        acc = std::fma(static_cast<float>(m[r * k_channels + c]), static_cast<float>(x[p + c]), acc);
      }
      y[p + r] = acc;
    }
  }
  return y;
}

// gather=1's permutation: output pixel p reads input pixel (p * multiplier) mod pixels. With the
// multiplier coprime to `pixels` that is a bijection (every input pixel read exactly once, so the declared
// bytes stay honest), and with it near 0.618 * pixels (a Weyl sequence) neighbouring outputs read pixels
// about a third of the array apart: every pixel load is its own DRAM sector. pixels < 2^32, so the
// product fits in 64 bits. constexpr: the device kernels call it too (--expt-relaxed-constexpr).
constexpr std::uint64_t gather_source(std::uint64_t p, std::uint64_t pixels, std::uint64_t multiplier) {
  return p * multiplier % pixels;
}

// gather=2's lookup: the same scattered order folded into a table of the first `table` pixels
// (gather_table_pixels), y[p] = M x[source mod table]: an embedding- or LUT-style gather whose table stays
// in L2, so the dependent load hits L2 and only the index and the output stream through DRAM.
inline constexpr std::uint64_t k_lookup_table_pixels = std::uint64_t{1} << 16;  // 2 MiB of pixels
constexpr std::uint64_t lookup_source(std::uint64_t p, std::uint64_t pixels, std::uint64_t multiplier,
                                      std::uint64_t table) {
  return gather_source(p, pixels, multiplier) % table;
}
constexpr std::uint64_t gather_table_pixels(std::uint64_t pixels) {
  return pixels < k_lookup_table_pixels ? pixels : k_lookup_table_pixels;
}

// gather=3's block remap: pixels move in runs of 32 (a warp's worth), whole runs permuted as gather=1
// permutes pixels, y[p] = M x[32 * perm(p / 32) + p % 32] (a paged layout's block table, as a paged KV
// cache reads its blocks). A warp's 32 index loads and its pixel loads are each contiguous (coalesced), but
// the pixel loads wait for the index loads: two dependent DRAM round trips per pixel. A last partial run
// keeps its place. `multiplier` is gather_multiplier(pixels / 32).
inline constexpr std::uint64_t k_remap_run = 32;
constexpr std::uint64_t block_remap_source(std::uint64_t p, std::uint64_t pixels, std::uint64_t multiplier) {
  const std::uint64_t runs = pixels / k_remap_run, run = p / k_remap_run;
  if (run >= runs) return p;
  return gather_source(run, runs, multiplier) * k_remap_run + p % k_remap_run;
}

// The source pixel of output pixel p for each value of the gather axis (0: p itself). `multiplier` and
// `table` as each mode's function above takes them.
constexpr std::uint64_t source_pixel(int gather, std::uint64_t p, std::uint64_t pixels, std::uint64_t multiplier,
                                     std::uint64_t table) {
  switch (gather) {
    case 1: return gather_source(p, pixels, multiplier);
    case 2: return lookup_source(p, pixels, multiplier, table);
    case 3: return block_remap_source(p, pixels, multiplier);
    default: return p;
  }
}

// The odd number nearest below 0.618 * pixels (at least 1) that is coprime to `pixels`.
inline std::uint64_t gather_multiplier(std::uint64_t pixels) {
  if (pixels <= 2) return 1;
  std::uint64_t m = static_cast<std::uint64_t>(0.6180339887498949 * static_cast<double>(pixels)) | 1u;
  while (m > 1 && std::gcd(m, pixels) != 1) m -= 2;
  return m;
}

// x gathered pixel by pixel: the input that gather mode `gather` (1, 2 or 3; source_pixel) mixes, for the
// host reference.
inline std::vector<double> gather_pixels(const std::vector<double>& x, int gather, std::uint64_t multiplier,
                                         std::uint64_t table) {
  const std::size_t pixels = x.size() / k_channels;
  std::vector<double> g(pixels * k_channels);
  for (std::size_t p = 0; p < pixels; ++p) {
    const std::size_t src = static_cast<std::size_t>(source_pixel(gather, p, pixels, multiplier, table));
    for (int c = 0; c < k_channels; ++c) g[p * k_channels + c] = x[src * k_channels + c];
  }
  return g;
}

}  // namespace aisp::ch06::launch_bounds
