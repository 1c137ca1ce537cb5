// ch14:autotune — one instantiation of tiled_sgemm_kernel per candidate of tiles.hpp, behind an index.
// Registers no variant: 01_fixed_tile and 02_autotuned both launch through it.
#include <array>
#include <stdexcept>
#include <string>
#include <utility>

#include "chapters/ch14_compilers/autotune/tiled_sgemm.cuh"
#include "chapters/ch14_compilers/autotune/tiles.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch14::autotune {
namespace {

template <int I>
void launch_one(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  constexpr TileConfig t = k_tiles[I];
  static_assert((t.bm / t.tm) * (t.bn / t.tn) == k_tile_threads, "every candidate has 256 threads");
  static_assert(t.bn / t.tn == 16, "every candidate has 16 thread columns");
  const dim3 grid((n + t.bn - 1) / t.bn, (m + t.bm - 1) / t.bm);
  tiled_sgemm_kernel<t.bm, t.bn, t.bk, t.tm, t.tn><<<grid, k_tile_threads, 0, stream>>>(a, b, c, m, n, k);
  AISP_CHECK_LAUNCH();
}

template <int I>
const void* kernel_of() {
  constexpr TileConfig t = k_tiles[I];
  return reinterpret_cast<const void*>(tiled_sgemm_kernel<t.bm, t.bn, t.bk, t.tm, t.tn>);
}

using LaunchFn = void (*)(const float*, const float*, float*, int, int, int, cudaStream_t);
using KernelFn = const void* (*)();

template <std::size_t... I>
constexpr std::array<LaunchFn, sizeof...(I)> launch_table(std::index_sequence<I...>) {
  return {&launch_one<static_cast<int>(I)>...};
}
template <std::size_t... I>
constexpr std::array<KernelFn, sizeof...(I)> kernel_table(std::index_sequence<I...>) {
  return {&kernel_of<static_cast<int>(I)>...};
}

constexpr auto k_launch = launch_table(std::make_index_sequence<k_tiles.size()>{});
constexpr auto k_kernel = kernel_table(std::make_index_sequence<k_tiles.size()>{});

void check_index(int tile) {
  if (tile < 0 || static_cast<std::size_t>(tile) >= k_tiles.size()) {
    throw std::out_of_range("ch14:autotune: no tile candidate " + std::to_string(tile));
  }
}

}  // namespace

void launch_tile(int tile, const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  check_index(tile);
  k_launch[static_cast<std::size_t>(tile)](a, b, c, m, n, k, stream);
}

const void* tile_kernel(int tile) {
  check_index(tile);
  return k_kernel[static_cast<std::size_t>(tile)]();
}

}  // namespace aisp::ch14::autotune
