// ch19:weight_only_gemv — the device side of the problem: the weight quantization of generate() and the
// trusted reference GEMV. Deliberately plain: one warp per quantization block, one thread per output
// with an fp64 sum in k order. Right, not fast; the host (reference.hpp, through check_reference_on_host
// below) checks both at the test size.
#include <cmath>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"

namespace aisp::ch19::weight_only_gemv {
namespace {

constexpr int k_ref_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// quant.hpp's quantize_symmetric: x / scale rounded to nearest (ties to even: rintf), then clamped.
// __fdiv_rn is the IEEE division the host does, whatever the nvcc flags say about fast division.
__device__ int quantize_value(float x, float scale, float q_max) {
  return static_cast<int>(fminf(fmaxf(rintf(__fdiv_rn(x, scale)), -q_max), q_max));
}

// One warp per block of `len` weights (a row for int8, a group of 128 for int4; blocks are contiguous in
// the row-major weights, so block blk starts at weight blk * len): amax by shuffles, scale = amax / q_max
// (1 for an all-zero block, as quant_scale), then every weight's code.
__global__ void quantize_kernel(const __nv_bfloat16* __restrict__ w16, std::size_t blocks, int len, int bits,
                                std::uint8_t* __restrict__ codes, float* __restrict__ scales) {
  const int lane = threadIdx.x % 32;
  const float q_max = bits == 8 ? static_cast<float>(k_int8_max) : static_cast<float>(k_int4_max);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x / 32);
  for (std::size_t blk = static_cast<std::size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; blk < blocks;
       blk += warps) {
    const __nv_bfloat16* v = w16 + blk * len;
    float amax = 0.0f;
    for (int i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(__bfloat162float(v[i])));
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(k_full_mask, amax, offset));
    const float scale = amax > 0.0f ? __fdiv_rn(amax, q_max) : 1.0f;
    if (lane == 0) scales[blk] = scale;
    if (bits == 8) {
      for (int i = lane; i < len; i += 32) {
        codes[blk * len + i] = static_cast<std::uint8_t>(quantize_value(__bfloat162float(v[i]), scale, q_max));
      }
    } else {
      // Weight 2p in the low nibble of byte p, 2p + 1 in the high one (quant.hpp's pack_int4).
      for (int p = lane; p < len / 2; p += 32) {
        const int lo = quantize_value(__bfloat162float(v[2 * p]), scale, q_max);
        const int hi = quantize_value(__bfloat162float(v[2 * p + 1]), scale, q_max);
        codes[blk * len / 2 + p] = static_cast<std::uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      }
    }
  }
}

// Weight (row, kk)'s value as every step must see it: scale * code, exact in fp64.
__device__ double reference_weight(const void* w, const float* scales, int bits, int row, int kk, int k) {
  const std::size_t idx = static_cast<std::size_t>(row) * k + kk;
  if (bits == 16) return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[idx]);
  const auto* bytes = static_cast<const std::uint8_t*>(w);
  if (bits == 8) return static_cast<double>(scales[row]) * static_cast<std::int8_t>(bytes[idx]);
  const std::uint8_t byte = bytes[idx / 2];
  // k is even, so idx and kk have the same parity: even weights in the low nibble. The casts to int8
  // then the arithmetic shift sign-extend the 4-bit two's complement code.
  const int code = kk % 2 == 0 ? static_cast<std::int8_t>(byte << 4) >> 4 : static_cast<std::int8_t>(byte) >> 4;
  return static_cast<double>(scales[static_cast<std::size_t>(row) * (k / k_group) + kk / k_group]) * code;
}

// One thread per output; neighbouring threads take the batch rows of one weight row, so a warp's weight
// loads are a few rows wide and hit L1 after the first.
__global__ void reference_kernel(const __nv_bfloat16* __restrict__ x, const void* w, const float* scales, int bits,
                                 int batch, int n, int k, double* __restrict__ y) {
  const std::size_t count = static_cast<std::size_t>(batch) * n;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(i % batch);
    const int row = static_cast<int>(i / batch);
    const __nv_bfloat16* xb = x + static_cast<std::size_t>(b) * k;
    double sum = 0;
    for (int kk = 0; kk < k; ++kk) {
      sum += static_cast<double>(__bfloat162float(xb[kk])) * reference_weight(w, scales, bits, row, kk, k);
    }
    y[static_cast<std::size_t>(b) * n + row] = sum;
  }
}

__global__ void round_kernel(const double* __restrict__ in, __nv_bfloat16* __restrict__ out, std::size_t count) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = __double2bfloat16(in[i]);
  }
}

int grid_for(std::size_t count) {
  const std::size_t blocks = (count + k_ref_threads - 1) / k_ref_threads;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride loops take the rest
}

}  // namespace

void quantize_on_device(const __nv_bfloat16* w16, const Shape& s, std::uint8_t* codes, float* scales, int sm_count,
                        cudaStream_t stream) {
  const std::size_t blocks = s.weight_count() / static_cast<std::size_t>(s.block_len());
  quantize_kernel<<<sm_count * 8, k_ref_threads, 0, stream>>>(w16, blocks, s.block_len(), s.bits, codes, scales);
  AISP_CHECK_LAUNCH();
}

void launch_reference(const __nv_bfloat16* x, const void* w, const float* scales, int bits, const Shape& s,
                      double* y_exact, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(s.batch) * s.n;
  reference_kernel<<<grid_for(count), k_ref_threads, 0, stream>>>(x, w, scales, bits, s.batch, s.n, s.k, y_exact);
  AISP_CHECK_LAUNCH();
}

void round_to_bf16(const double* y_exact, __nv_bfloat16* y, std::size_t count, cudaStream_t stream) {
  round_kernel<<<grid_for(count), k_ref_threads, 0, stream>>>(y_exact, y, count);
  AISP_CHECK_LAUNCH();
}

std::string WeightOnlyGemvProblem::check_reference_on_host(cudaStream_t stream) {
  const std::vector<double> x = to_host({"x", m_x.data(), m_x.size(), DType::bf16}, stream);
  const std::vector<double> w16 = to_host({"w_bf16", m_w16.data(), m_w16.size(), DType::bf16}, stream);
  std::vector<double> w = w16;
  if (m_shape.bits != 16) {
    const std::vector<float> source(w16.begin(), w16.end());  // bf16 values: exact as floats
    const QuantizedWeights want = quantize_weights(m_shape, source);
    const std::vector<double> codes = to_host({"w_codes", m_codes.data(), m_codes.size(), DType::u8}, stream);
    const std::vector<double> scales = to_host({"w_scales", m_scales.data(), m_scales.size(), DType::f32}, stream);
    for (std::size_t i = 0; i < want.codes.size(); ++i) {
      int got = 0;
      if (m_shape.bits == 8) {
        got = static_cast<int>(codes[i]) > 127 ? static_cast<int>(codes[i]) - 256 : static_cast<int>(codes[i]);
      } else {
        const auto byte = static_cast<std::uint8_t>(codes[i / 2]);
        got = i % 2 == 0 ? unpack_int4_low(byte) : unpack_int4_high(byte);
      }
      if (got != want.codes[i]) {
        return "w_codes: weight " + std::to_string(i) + " is " + std::to_string(got) + " on the device, " +
               std::to_string(want.codes[i]) + " on the host";
      }
    }
    for (std::size_t i = 0; i < want.scales.size(); ++i) {
      if (static_cast<float>(scales[i]) != want.scales[i]) {
        return "w_scales: scale " + std::to_string(i) + " is " + std::to_string(scales[i]) + " on the device, " +
               std::to_string(want.scales[i]) + " on the host";
      }
    }
    w = dequantize(m_shape, want);
    const QuantError e = quant_error(gemv(m_shape, x, w), gemv(m_shape, x, w16));
    if (std::fabs(e.max_rel - m_error.max_rel) > 1e-9 || std::fabs(e.rms_rel - m_error.rms_rel) > 1e-9) {
      return "error facts: the device's max " + std::to_string(m_error.max_rel) + " rms " +
             std::to_string(m_error.rms_rel) + ", the host's max " + std::to_string(e.max_rel) + " rms " +
             std::to_string(e.rms_rel);
    }
  }
  return compare_on_host("y_ref", to_host(references()[0], stream), gemv(m_shape, x, w), tolerance());
}

}  // namespace aisp::ch19::weight_only_gemv
