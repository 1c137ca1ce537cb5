// The wgmma probe of the tensor ceilings (device/probes_tensor.cu): a kernel that keeps Hopper's tensor
// cores busy from shared memory with no DRAM traffic in its loop, so that `tensor_*` is the hardware's
// rate and not one library's GEMM (docs/ceilings.md "Tensor ceilings: the wgmma probe"). The timing, the
// check and the merge with the cuBLASLt GEMM are in device/probes_gemm.cpp.
//
// What one CTA computes, per warpgroup w: D_w (64 x 256, fp32) = k_wgmma_passes x A_w * B^T, where A_w is
// rows 64w .. 64w + 63 of the A tile and B the B tile, both K-major with one 128-byte row of K each
// (64 bf16/fp16, 32 tf32 or 128 fp8 values): a GEMM with K = k_wgmma_passes x 128 bytes whose K blocks
// repeat. Every round recomputes it from zero; all CTAs hold the same tiles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/base/device_facts.hpp"
#include "device/probe_kernels.hpp"

namespace aisp::probe {

inline constexpr int k_wgmma_warpgroups = 2;   // consumer warpgroups per CTA (each 64 rows of A)
inline constexpr int k_wgmma_m = 64;           // rows of one wgmma (and of one warpgroup's A)
inline constexpr int k_wgmma_n = 256;          // columns of one wgmma: the widest shape
inline constexpr int k_wgmma_row_bytes = 128;  // K per tile row: one 128-byte swizzle row
inline constexpr int k_wgmma_slices = 4;       // wgmma per tile row: 32 bytes of K each
inline constexpr int k_wgmma_passes = 16;      // passes over the tile per round (one commit group each)
inline constexpr int k_wgmma_groups_in_flight = 2;  // committed groups a warpgroup leaves pending
inline constexpr int k_wgmma_a_rows = k_wgmma_warpgroups * k_wgmma_m;
inline constexpr int k_wgmma_b_rows = k_wgmma_n;
inline constexpr std::size_t k_wgmma_tile_bytes =
    static_cast<std::size_t>(k_wgmma_a_rows + k_wgmma_b_rows) * k_wgmma_row_bytes;
inline constexpr int k_wgmma_d_floats = k_wgmma_warpgroups * k_wgmma_m * k_wgmma_n;  // CTA 0's D, row-major

// One instruction of the probe for an operand type (Operand::f32 means tf32 math on fp32 storage).
struct WgmmaShape {
  const char* instruction;  // "wgmma.mma_async m64n256k16 .f32.bf16.bf16"
  int k;                    // K of one wgmma
  int elem_bytes;
  double dense_flop_per_clk_sm;  // Hopper (sm_90): 4 tensor cores per SM
};
WgmmaShape wgmma_shape(Operand type);

// True when the code this build runs on the current device was compiled for sm_90a (the wgmma path):
// a tiny kernel reports whether __CUDA_ARCH_FEAT_SM90_ALL was defined where it was compiled.
bool wgmma_probe_compiled(cudaStream_t stream);

// CTAs of one launch: the CTAs that fit on an SM (the runtime's occupancy, 1 by design) x the SM count.
int wgmma_probe_ctas(const DeviceFacts& d);

// `tiles`: k_wgmma_tile_bytes, the A tile's rows then the B tile's, each row 128 bytes of K in order (the
// kernel swizzles them into shared memory). `sums`: ctas x k_wgmma_warpgroups floats, each warpgroup's
// weighted checksum sum(wgmma_checksum_weight(r, c) * D[r][c]). `tile_out`: nullptr, or
// k_wgmma_d_floats for CTA 0's accumulators (warpgroup-major, then row-major 64 x 256). rounds >= 1.
void launch_wgmma_probe(Operand type, const void* tiles, int rounds, float* sums, float* tile_out, int ctas,
                        cudaStream_t stream);

// The checksum weight of row r (0..63, within a warpgroup) and column c: distinct small multiples of
// 1/16, exact in fp32, so that a misplaced element changes the sum.
double wgmma_checksum_weight(int row, int col);

}  // namespace aisp::probe
