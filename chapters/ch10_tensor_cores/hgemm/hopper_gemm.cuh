// ch10:hgemm — the Hopper primitives that only this ladder's steps 04-08 use: the GEMM's K block, the
// m64n256k16 bf16 wgmma and the 64 x 256 register-to-global epilogue. The generic vocabulary (mbarriers,
// TMA loads and stores, the K-major 128B-swizzle descriptor, the wgmma fence/commit/wait trio, setmaxnreg,
// named barriers, step 08's staging of the epilogue in swizzled shared memory, the K-major bf16 tensor map
// and the tensor-map encoder) lives in kernels/common/hopper.cuh, shared with ch18:flash_attention and
// ch19:fp8_gemm, and is visible here as hopper::name as before. Each step's file holds its own kernel;
// only these thin PTX wrappers are common (they are the vocabulary, not the idea, of every step).
//
// PTX ISA sections cited (PTX ISA 8.x / 9.0): "Warpgroup Matrix Multiply-Accumulate Instructions":
// wgmma.mma_async. CUDA C++ Programming Guide: "Asynchronous Data Copies using the Tensor Memory
// Accelerator (TMA)".
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/hopper.cuh"

namespace aisp::ch10::hgemm::hopper {

using namespace ::aisp::hopper;  // the shared vocabulary (kernels/common/hopper.cuh)

// One K block of a stage is 64 bf16 = 128 bytes per row: exactly the span of the 128-byte swizzle, so a
// tile row is one swizzle row and a tile of R rows is R / 8 swizzle atoms of 8 x 128 B = 1024 B.
constexpr int k_block_k = 64;

// ---- wgmma ----------------------------------------------------------------------------------------------

// d (64 x 256 fp32, 128 registers per thread) += A (64 x 16, K-major in shared memory) * B^T (B: 256 x 16,
// K-major in shared memory), bf16 inputs. Fragment of d: thread t of the warpgroup holds, for n8 chunk j,
// d[4j], d[4j+1] at row 16 * (t / 32) + (t % 32) / 4, columns 8j + 2 * (t % 4) + {0, 1}; d[4j+2], d[4j+3]
// at the row 8 below.
// scale_d = 0 ignores the old d (d = A * B^T): the first K step of a tile needs no zeroed registers.
__device__ inline void wgmma_m64n256k16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b, int scale_d) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// ---- epilogue -----------------------------------------------------------------------------------------

// Writes a consumer warpgroup's 64 x 256 accumulators, rounded to bf16, to C at (row0, col0): two
// neighbouring columns per 4-byte store (the fragment layout above).
__device__ inline void store_tile_64x256(const float (&d)[128], __nv_bfloat16* c, int ldc, int row0, int col0) {
  const int t = threadIdx.x % 128;
  const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
  const int col = col0 + 2 * (t % 4);
  __nv_bfloat16* top = c + static_cast<std::size_t>(row) * ldc + col;
  __nv_bfloat16* bottom = top + static_cast<std::size_t>(8) * ldc;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    *reinterpret_cast<__nv_bfloat162*>(top + 8 * j) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<__nv_bfloat162*>(bottom + 8 * j) = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
  }
}

}  // namespace aisp::ch10::hgemm::hopper
