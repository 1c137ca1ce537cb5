// Row-wise FP8 e4m3 quantization (fp8_quant.hpp): one block per row, two passes over the row. The first
// finds the row's largest magnitude (a block reduction: warp shuffles, then one value per warp in shared
// memory); the second reads the row again (at most 2 * 14336 bytes for the 8B shape's down projection:
// it is still in L1/L2) and writes 8 codes per 16-byte input vector. At decode sizes a call is a few
// microseconds of launch; the GEMM after it is what costs.
#include "serving/gpu/fp8_quant.hpp"

#include <cuda_fp8.h>

#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {
namespace {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr float k_e4m3_max = 448.0f;  // the largest finite e4m3 value (1.75 * 2^8)

// The largest of every thread's `v` in the block, returned to every thread. Called once per block.
__device__ float block_max(float v) {
  __shared__ float warp_max[k_warps];
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_max[0];
  for (int w = 1; w < k_warps; ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

// 8 bf16 values of one 16-byte load.
__device__ void unpack8(const uint4& raw, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__global__ void __launch_bounds__(k_threads)
    quantize_rows_e4m3_kernel(const __nv_bfloat16* in, int ld_in, int k, std::uint8_t* out, float* scale) {
  const auto row = static_cast<std::int64_t>(blockIdx.x);
  const auto* src = reinterpret_cast<const uint4*>(in + row * ld_in);
  const int vectors = k / 8;
  float amax = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += k_threads) {
    float x[8];
    unpack8(src[v], x);
    for (const float e : x) amax = fmaxf(amax, fabsf(e));
  }
  amax = block_max(amax);
  // As ch19's quant_scale: an all-zero row takes scale 1 (any scale is exact for it). __fdiv_rn is the
  // IEEE division the host twin does, whatever the build's fast-math flags.
  const float s = amax > 0.0f ? __fdiv_rn(amax, k_e4m3_max) : 1.0f;
  if (threadIdx.x == 0) scale[row] = s;
  auto* dst = reinterpret_cast<uint2*>(out + row * k);
  for (int v = threadIdx.x; v < vectors; v += k_threads) {
    float x[8];
    unpack8(src[v], x);
    uint2 packed;
    auto* codes = reinterpret_cast<__nv_fp8_storage_t*>(&packed);
    for (int i = 0; i < 8; ++i) codes[i] = __nv_cvt_float_to_fp8(__fdiv_rn(x[i], s), __NV_SATFINITE, __NV_E4M3);
    dst[v] = packed;
  }
}

}  // namespace

void launch_quantize_rows_e4m3(const __nv_bfloat16* in, int ld_in, int rows, int k, std::uint8_t* out, float* scale,
                               cudaStream_t stream) {
  if (rows == 0) return;
  quantize_rows_e4m3_kernel<<<rows, k_threads, 0, stream>>>(in, ld_in, k, out, scale);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
