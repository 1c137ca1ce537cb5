// FP8 e4m3 quantization of bf16 rows on the device (fp8_quant.cu), for the runner's fp8_weights path
// (RunnerOptions::fp8_weights): the same kernel quantizes each Linear weight once at construction (a row
// of W [n][k] is an output channel: per-channel scales) and each GEMM's activations before it (a row of x
// [rows][k] is a token: per-token scales, computed anew every step). Its host twin, bit for bit, is
// fp8_reference.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace aisp::serving::gpu {

// For each of `rows` rows of `k` bf16 values (row stride ld_in elements):
//   scale[r] = amax_r / 448 (1 for an all-zero row),  out[r][i] = e4m3(in[r][i] / scale[r])
// with the division in fp32 rounded to nearest, the conversion rounding to nearest even and saturating at
// +-448 (cuda_fp8.h's __NV_SATFINITE). out's rows are k bytes apart. Needs k % 8 == 0, ld_in % 8 == 0,
// `in` 16-byte and `out` 8-byte aligned (16-byte vectors in, 8-byte vectors out). One block per row.
void launch_quantize_rows_e4m3(const __nv_bfloat16* in, int ld_in, int rows, int k, std::uint8_t* out, float* scale,
                               cudaStream_t stream);

}  // namespace aisp::serving::gpu
