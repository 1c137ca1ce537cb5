// ch18:flash_attention — what the Hopper steps (04 on) need beyond kernels/common/hopper.cuh: 3-D TMA
// tensor maps and loads (one plane per head, so a box never reads into the next head), named barriers
// (06 on), the descriptor of an MN-major (transposed) B operand, and the wgmma shapes of the two attention
// GEMMs — S = Q K^T with both operands in shared memory, O += P V with P from registers.
//
// PTX ISA sections cited (PTX ISA 8.x / 9.0): "cp.async.bulk.tensor" (.3d, tile mode); "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate Instructions: wgmma.mma_async" (the register-A form
// `d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b`), "Register Fragments" (Figures "WGMMA
// .m64nNk16 register fragment layout for matrix A / accumulator D"), "Shared Memory Matrix Layout"
// (MN-major 128B swizzling, "Leading/Stride Dimension Byte Offset", "Canonical Layouts") and "Matrix
// Descriptor Format".
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/common/hopper.cuh"

namespace aisp::ch18::flash_attention::hopper_fa {

using namespace ::aisp::hopper;

// Every shared-memory tile is stored as chunks of 64 head-dim columns: 64 bf16 = 128 bytes per row, the
// span of the 128-byte swizzle (a TMA box with that swizzle is at most 128 bytes wide). A chunk of R rows
// is R / 8 swizzle atoms of 8 rows x 128 B = 1024 B, and starts 1024-byte aligned.
constexpr int k_chunk_cols = 64;
constexpr int k_chunk_row_bytes = 128;

// ---- TMA ------------------------------------------------------------------------------------------------

// Loads the box at element coordinates (x = column, y = row, z = plane) of a 3-D map; its bytes complete
// on `bar`. Rows past the plane's end are zero-filled by the copy engine, and still counted in the bytes
// the barrier waits for (the box is always written whole).
__device__ inline void tma_load_3d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int x, int y, int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], [%2];" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(x), "r"(y), "r"(z)
      : "memory");
}

// A [planes][rows][cols] bf16 tensor (cols contiguous) read in boxes of box_rows x 64 columns of one
// plane, 128-byte swizzled. A plane is one (batch, head): a box of keys that starts near the end of a
// head is zero-filled past `rows` instead of reading the next head's first keys, which a 2-D
// [(planes * rows)][cols] map would do.
inline CUtensorMap make_tensor_map_3d(const __nv_bfloat16* base, int planes, int rows, int cols, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(planes)};
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(cols) * sizeof(__nv_bfloat16);
  const cuuint64_t strides[2] = {row_bytes, row_bytes * static_cast<cuuint64_t>(rows)};  // dims 1 and 2
  const cuuint32_t box[3] = {k_chunk_cols, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(base),
                                          dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // NONE: out-of-bounds reads 0
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled (3-D) failed with CUresult " +
                             std::to_string(static_cast<int>(r)));
  }
  return map;
}

// Named barriers (steps 06 on): named_barrier_sync / named_barrier_arrive, kernels/common/hopper.cuh.

// ---- wgmma descriptors and register fences ----------------------------------------------------------------

// Descriptor of an MN-major B operand (the GEMM's N dimension contiguous) in 128B-swizzled chunks of
// 64 N-columns: used for V in O += P V, where K = keys and N = head_dim, and V's tile is stored [key][d]
// with d contiguous. PTX ISA "Canonical Layouts", MN-major, 128B swizzling: ((T,8,m),(8,k)) :
// ((1,T,LBO),(8T,SBO)) with T = 8 bf16 per 16 bytes, i.e. 64 contiguous N-elements (one 128-byte row, one
// key), 8 such rows (keys) per 1024-byte atom; "Leading Dimension Byte Offset" (MN-major, swizzled) is
// the step to the next 64 N-columns (the next chunk, `chunk_bytes` away), "Stride Dimension Byte Offset"
// the step to the next 8 K-rows (1024 B). Used with imm-trans-b = 1.
__device__ inline std::uint64_t smem_desc_mn_major(const void* tile, unsigned chunk_bytes) {
  const std::uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFFULL) >> 4) | (static_cast<std::uint64_t>((chunk_bytes & 0x3FFFFU) >> 4) << 16) |
         ((1024ULL >> 4) << 32) | (1ULL << 62);
}

// fence_regs (pins accumulator registers between wgmma.fence / wait_group): kernels/common/hopper.cuh.

// ---- wgmma shapes ---------------------------------------------------------------------------------------
//
// Accumulator fragment of m64nN (fp32, N / 2 registers): thread t of the warpgroup, w = t / 32, l = t % 32,
// holds for each n8 chunk j: d[4j], d[4j+1] at row 16w + l/4, columns 8j + 2(l%4) + {0, 1}; d[4j+2], d[4j+3]
// at row 16w + l/4 + 8. Register A fragment of m64nNk16 (bf16): four b32 registers, warp w holding rows
// 16w..16w+15 as mma.sync's m16n8k16 A: a[0] = (row l/4, k 2(l%4), +1), a[1] = (row l/4 + 8, same k),
// a[2] = (row l/4, k 8 + 2(l%4), +1), a[3] = (row l/4 + 8, same k), low half = lower k.

// The operand lists: N/2 accumulators "+f"(d[i]) and their "%i" placeholders, eight at a time.
#define AISP_FA_D8(i)                                                                                 \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define AISP_FA_D32 AISP_FA_D8(0), AISP_FA_D8(8), AISP_FA_D8(16), AISP_FA_D8(24)
#define AISP_FA_D64 AISP_FA_D32, AISP_FA_D8(32), AISP_FA_D8(40), AISP_FA_D8(48), AISP_FA_D8(56)
#define AISP_FA_D128                                                                                    \
  AISP_FA_D64, AISP_FA_D8(64), AISP_FA_D8(72), AISP_FA_D8(80), AISP_FA_D8(88), AISP_FA_D8(96), AISP_FA_D8(104), \
      AISP_FA_D8(112), AISP_FA_D8(120)
#define AISP_FA_R32                                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#define AISP_FA_R64                                                                                         \
  AISP_FA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
              "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define AISP_FA_R128                                                                                         \
  AISP_FA_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "  \
              "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "    \
              "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, "    \
              "%115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// d (64 x N) = A (64 x 16, K-major in shared memory) * B (16 x N, stored K-major: N rows of K) [+ d when
// accumulate != 0]. S = Q K^T: A = this warpgroup's 64 rows of Q, B = the tile's keys (rows) by head_dim.
template <int N>
__device__ inline void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128, "instantiate the shapes the kernels use");
  if constexpr (N == 64) {
    asm volatile(
        "{ .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" AISP_FA_R32 "}, %32, %33, p, 1, 1, 0, 0; }"
        : AISP_FA_D32
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(
        "{ .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" AISP_FA_R64 "}, %64, %65, p, 1, 1, 0, 0; }"
        : AISP_FA_D64
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
}

// d (64 x N) += A (64 x 16, bf16 in registers: the fragment above) * B (16 x N, MN-major in shared memory:
// imm-trans-b = 1). O += P V: A = P of 16 keys, B = those 16 keys' rows of V, N = head_dim. scale-d is a
// predicate operand, set from a register that is always 1 (O is zeroed once before the first tile).
template <int N>
__device__ inline void wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4], std::uint64_t desc_b) {
  static_assert(N == 64 || N == 128 || N == 256, "instantiate the shapes the kernels use");
  if constexpr (N == 64) {
    asm volatile(
        "{ .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" AISP_FA_R32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1; }"
        : AISP_FA_D32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (N == 128) {
    asm volatile(
        "{ .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" AISP_FA_R64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1; }"
        : AISP_FA_D64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else {
    asm volatile(
        "{ .reg .pred p;\n setp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" AISP_FA_R128
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1; }"
        : AISP_FA_D128
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  }
}

#undef AISP_FA_D8
#undef AISP_FA_D32
#undef AISP_FA_D64
#undef AISP_FA_D128
#undef AISP_FA_R32
#undef AISP_FA_R64
#undef AISP_FA_R128

}  // namespace aisp::ch18::flash_attention::hopper_fa
