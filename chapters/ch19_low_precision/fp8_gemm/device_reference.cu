// ch19:fp8_gemm — the problem's device side: quantizing the fp32 sources to e4m3 with their scales, and
// the trusted reference GEMM. Deliberately plain: CUDA cores, fp32, k in order within each 128-wide K
// block (the host reference in reference.hpp does the same sums and checks it at the test size).
#include <cuda_fp8.h>

#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "chapters/ch19_low_precision/fp8_gemm/reference.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch19::fp8_gemm {
namespace {

constexpr float k_e4m3_max_f = 448.0f;

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// common/quant.hpp's quant_scale: amax / 448, or 1 for an all-zero block.
__device__ inline float scale_for(float amax) { return amax > 0.0f ? amax / k_e4m3_max_f : 1.0f; }

__device__ inline std::uint8_t to_e4m3(float x, float scale) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3));
}

__device__ inline float from_e4m3(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Per-tensor: the absolute maximum of n values into *amax (zeroed before). Magnitudes are non-negative,
// so their float bit patterns order as integers and atomicMax on the bits is a float max.
__global__ void amax_kernel(const float* x, std::size_t n, float* amax) {
  float m = 0.0f;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    m = fmaxf(m, fabsf(x[i]));
  }
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

__global__ void quantize_tensor_kernel(const float* x, std::size_t n, const float* amax, std::uint8_t* q,
                                       float* scale_out) {
  const float scale = scale_for(*amax);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = scale;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    q[i] = to_e4m3(x[i], scale);
  }
}

// A's 1 x 128 blocks: one warp per (row, K block), 4 values per lane; scale to sa[kb][row].
__global__ void quantize_rows_kernel(const float* x, int rows, int k, std::uint8_t* q, float* scales) {
  const int warp = static_cast<int>((static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  const int lane = threadIdx.x % 32;
  const int blocks_k = k / k_scale_block;
  if (warp >= rows * blocks_k) return;  // whole warps only: rows * blocks_k warps exactly fill the grid's
  const int row = warp / blocks_k, kb = warp % blocks_k;
  const std::size_t base = static_cast<std::size_t>(row) * k + static_cast<std::size_t>(kb) * k_scale_block;
  float v[4];
  float m = 0.0f;
  for (int i = 0; i < 4; ++i) {
    v[i] = x[base + lane + 32 * i];
    m = fmaxf(m, fabsf(v[i]));
  }
  const float scale = scale_for(warp_max(m));
  for (int i = 0; i < 4; ++i) q[base + lane + 32 * i] = to_e4m3(v[i], scale);
  if (lane == 0) scales[static_cast<std::size_t>(kb) * rows + row] = scale;
}

// B's 128 x 128 blocks: one 256-thread block per (row block, K block); scale to sb[kb][row block].
__global__ void quantize_tiles_kernel(const float* x, int rows, int k, std::uint8_t* q, float* scales) {
  __shared__ float warp_maxes[8];
  const int rb = blockIdx.x, kb = blockIdx.y;
  const int col = threadIdx.x % k_scale_block;  // 2 threads per column... each covers half of the rows
  const int half = threadIdx.x / k_scale_block;
  float m = 0.0f;
  for (int r = half; r < k_scale_block; r += 2) {
    const std::size_t at = static_cast<std::size_t>(rb * k_scale_block + r) * k + kb * k_scale_block + col;
    m = fmaxf(m, fabsf(x[at]));
  }
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) warp_maxes[threadIdx.x / 32] = m;
  __syncthreads();
  float amax = 0.0f;
  for (int w = 0; w < 8; ++w) amax = fmaxf(amax, warp_maxes[w]);
  const float scale = scale_for(amax);
  for (int r = half; r < k_scale_block; r += 2) {
    const std::size_t at = static_cast<std::size_t>(rb * k_scale_block + r) * k + kb * k_scale_block + col;
    q[at] = to_e4m3(x[at], scale);
  }
  if (threadIdx.x == 0) scales[static_cast<std::size_t>(kb) * (rows / k_scale_block) + rb] = scale;
}

// The reference: a 64 x 64 tile per 256-thread block, 4 x 4 outputs per thread, K in chunks of 32
// decoded to fp32 in shared memory. Each 128-wide K block is summed alone, then scaled and added
// (per-tensor: one block of the whole K, scaled once).
constexpr int k_ref_tile = 64, k_ref_chunk = 32;

__global__ void __launch_bounds__(256) reference_gemm_kernel(const Args a, __nv_bfloat16* c) {
  __shared__ float as[k_ref_chunk][k_ref_tile + 1];
  __shared__ float bs[k_ref_chunk][k_ref_tile + 1];
  const int row0 = blockIdx.y * k_ref_tile, col0 = blockIdx.x * k_ref_tile;
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;  // this thread's rows tr + 16 i, cols tc + 16 j
  const int block = a.scale_block == 0 ? a.k : k_scale_block;
  float total[4][4] = {}, partial[4][4] = {};
  for (int k0 = 0; k0 < a.k; k0 += k_ref_chunk) {
    for (int e = threadIdx.x; e < k_ref_chunk * k_ref_tile; e += 256) {
      const int r = e / k_ref_chunk, kk = e % k_ref_chunk;
      as[kk][r] = from_e4m3(a.a[static_cast<std::size_t>(row0 + r) * a.k + k0 + kk]);
      bs[kk][r] = from_e4m3(a.b[static_cast<std::size_t>(col0 + r) * a.k + k0 + kk]);
    }
    __syncthreads();
    for (int kk = 0; kk < k_ref_chunk; ++kk) {
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) partial[i][j] += as[kk][tr + 16 * i] * bs[kk][tc + 16 * j];
      }
    }
    __syncthreads();
    if ((k0 + k_ref_chunk) % block == 0) {  // the end of a scaling block
      const int kb = k0 / k_scale_block;
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          const int row = row0 + tr + 16 * i, col = col0 + tc + 16 * j;
          if (a.scale_block == 0) {
            total[i][j] = partial[i][j] * (a.scale_a[0] * a.scale_b[0]);
          } else {
            const float s = a.scale_a[static_cast<std::size_t>(kb) * a.m + row] *
                            a.scale_b[static_cast<std::size_t>(kb) * (a.n / k_scale_block) + col / k_scale_block];
            total[i][j] += partial[i][j] * s;
          }
          partial[i][j] = 0.0f;
        }
      }
    }
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      c[static_cast<std::size_t>(row0 + tr + 16 * i) * a.n + col0 + tc + 16 * j] = __float2bfloat16_rn(total[i][j]);
    }
  }
}

}  // namespace

void quantize_operands(const float* src_a, const float* src_b, const Args& a, float* amax_scratch,
                       cudaStream_t stream) {
  auto* qa = const_cast<std::uint8_t*>(a.a);
  auto* qb = const_cast<std::uint8_t*>(a.b);
  auto* sa = const_cast<float*>(a.scale_a);
  auto* sb = const_cast<float*>(a.scale_b);
  const std::size_t mk = static_cast<std::size_t>(a.m) * a.k, nk = static_cast<std::size_t>(a.n) * a.k;
  if (a.scale_block == 0) {
    AISP_CUDA_CHECK(cudaMemsetAsync(amax_scratch, 0, 2 * sizeof(float), stream));
    amax_kernel<<<1024, 256, 0, stream>>>(src_a, mk, amax_scratch);
    AISP_CHECK_LAUNCH();
    amax_kernel<<<1024, 256, 0, stream>>>(src_b, nk, amax_scratch + 1);
    AISP_CHECK_LAUNCH();
    quantize_tensor_kernel<<<1024, 256, 0, stream>>>(src_a, mk, amax_scratch, qa, sa);
    AISP_CHECK_LAUNCH();
    quantize_tensor_kernel<<<1024, 256, 0, stream>>>(src_b, nk, amax_scratch + 1, qb, sb);
    AISP_CHECK_LAUNCH();
    return;
  }
  const int warps = a.m * (a.k / k_scale_block);  // a multiple of 8: m is a multiple of 256
  quantize_rows_kernel<<<warps / 8, 256, 0, stream>>>(src_a, a.m, a.k, qa, sa);
  AISP_CHECK_LAUNCH();
  quantize_tiles_kernel<<<dim3(a.n / k_scale_block, a.k / k_scale_block), 256, 0, stream>>>(src_b, a.n, a.k, qb, sb);
  AISP_CHECK_LAUNCH();
}

void reference_gemm(const Args& a, __nv_bfloat16* c_ref, cudaStream_t stream) {
  reference_gemm_kernel<<<dim3(a.n / k_ref_tile, a.m / k_ref_tile), 256, 0, stream>>>(a, c_ref);
  AISP_CHECK_LAUNCH();
}

std::string Fp8GemmProblem::check_reference_on_host(cudaStream_t stream) {
  const auto bytes = [&](const TensorView& t) {
    std::vector<std::uint8_t> out;
    for (const double v : to_host(t, stream)) out.push_back(static_cast<std::uint8_t>(v));
    return out;
  };
  const auto floats = [&](const TensorView& t) {
    std::vector<float> out;
    for (const double v : to_host(t, stream)) out.push_back(static_cast<float>(v));
    return out;
  };
  const std::vector<TensorView> in = inputs();
  const std::vector<double> want =
      gemm_fp8_tn(bytes(in[0]), bytes(in[1]), floats(in[2]), floats(in[3]), m_m, m_n, m_k, m_block);
  // The same sums in the same order: only the last bit of an fp32 sum may differ (fma contraction of
  // the scale multiply), so the ladder's tolerance is more than enough here.
  return compare_on_host("c_ref", to_host(references()[0], stream), want, tolerance());
}

}  // namespace aisp::ch19::fp8_gemm
