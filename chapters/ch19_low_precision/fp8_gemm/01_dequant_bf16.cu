// ch19:fp8_gemm:01_dequant_bf16 — what a first attempt does with FP8 weights and activations: turn them
// back into bf16 and call the best bf16 GEMM there is.
//
// What it does: one elementwise kernel decodes each e4m3 code and multiplies it by its scale (per-tensor
// or the element's block scale), writing bf16 copies of A and B; then cuBLASLt's bf16 GEMM (the same
// plan as ch10:hgemm's vendor_cublas: fp32 compute, bf16 out) multiplies them. Correct for both scaling
// modes, because the scales are applied before the product.
// Why it is slow: the FP8 tensor cores never run. The GEMM runs at the bf16 rate (about half the FP8
// rate on Hopper), and the dequantization writes 2 bytes and reads 1 per element of A and B before the
// GEMM reads them again.
// Napkin math (8192^3, H100 SXM datasheet: 989 bf16 dense TFLOP/s, 3.35 TB/s): the GEMM alone is
// 1.1 PFLOP / ~750 TFLOP/s (what cuBLASLt reaches) ~ 1.47 ms; the dequantization moves 3 * 2 * 64 MiB
// ~ 0.4 GB, ~0.12 ms. The FP8 steps aim at ~0.8 ms.
// Run: aisp bench run --targets ch19:fp8_gemm:01_dequant_bf16
#include <cuda_fp8.h>

#include <memory>

#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "kernels/common/lt_gemm_tn.hpp"  // cuBLASLt's TN bf16 GEMM plan

namespace aisp::ch19::fp8_gemm::v01 {

constexpr int k_codes_per_thread = 16;  // one 16-byte load of codes, two 16-byte stores of bf16

// out[r][k] = decode(q[r][k]) * scale of (r, k): per-tensor scales[0], else scales[(k / 128) * ld + r /
// row_block] (A: row_block 1, ld = M; B: row_block 128, ld = N / 128).
__global__ void dequantize_kernel(const std::uint8_t* __restrict__ q, const float* __restrict__ scales, int rows,
                                  int k, int scale_block, int row_block, __nv_bfloat16* __restrict__ out) {
  const std::size_t chunk = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t first = chunk * k_codes_per_thread;
  if (first >= static_cast<std::size_t>(rows) * k) return;
  const int r = static_cast<int>(first / k), kk = static_cast<int>(first % k);  // 16 | k: one row, one K block
  const float scale = scale_block == 0
                          ? scales[0]
                          : scales[static_cast<std::size_t>(kk / k_scale_block) * (rows / row_block) + r / row_block];
  const uint4 packed = *reinterpret_cast<const uint4*>(q + first);
  const std::uint8_t* codes = reinterpret_cast<const std::uint8_t*>(&packed);
  __align__(16) __nv_bfloat16 values[k_codes_per_thread];
#pragma unroll
  for (int i = 0; i < k_codes_per_thread; ++i) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(codes[i]), __NV_E4M3);
    values[i] = __float2bfloat16_rn(__half2float(__half(h)) * scale);
  }
  reinterpret_cast<uint4*>(out + first)[0] = reinterpret_cast<const uint4*>(values)[0];
  reinterpret_cast<uint4*>(out + first)[1] = reinterpret_cast<const uint4*>(values)[1];
}

class DequantBf16 {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_a16 = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(a.m) * a.k);
    m_b16 = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(a.n) * a.k);
    m_gemm = std::make_unique<LtGemmTn>(a.m, a.n, a.k);
  }
  void launch(const Args& a, cudaStream_t stream) {
    dequantize(a.a, a.scale_a, a.m, a.k, a.scale_block, 1, m_a16.data(), stream);
    dequantize(a.b, a.scale_b, a.n, a.k, a.scale_block, k_scale_block, m_b16.data(), stream);
    m_gemm->run(m_a16.data(), m_b16.data(), a.c, stream);
  }

 private:
  static void dequantize(const std::uint8_t* q, const float* scales, int rows, int k, int scale_block, int row_block,
                         __nv_bfloat16* out, cudaStream_t stream) {
    const std::size_t chunks = static_cast<std::size_t>(rows) * k / k_codes_per_thread;
    const int threads = 256;
    dequantize_kernel<<<static_cast<unsigned>((chunks + threads - 1) / threads), threads, 0, stream>>>(
        q, scales, rows, k, scale_block, row_block, out);
    AISP_CHECK_LAUNCH();
  }

  DeviceBuffer<__nv_bfloat16> m_a16, m_b16;
  std::unique_ptr<LtGemmTn> m_gemm;
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, DequantBf16, .step = 1, .slug = "dequant_bf16",
                               .kind = VariantKind::baseline,
                               .summary = "dequantize A and B to bf16 (scales applied), then cuBLASLt's bf16 GEMM");

}  // namespace aisp::ch19::fp8_gemm::v01
