// ch19:weight_only_gemv:04_fast_dequant — codes become floats by bit tricks instead of int-to-float
// conversions, and the scale multiplies a partial sum instead of every weight.
//
// What changed (against 03_rows_per_warp, same work decomposition: 4 rows per warp, x in shared memory,
// same SKIP rule): (1) int4: each 32-bit word's nibble pairs are OR-ed into the mantissa of the bf16 pair
// {128, 128} (an offset-binary nibble u in [0, 15] gives 128 + u, exact in bf16's 8 significant bits) and
// one packed bf16x2 subtraction of {136, 136} leaves the signed codes; a bf16 widens to fp32 by a shift
// (it is the top half of the float it equals). int8: each byte, offset-binary, is placed by one PRMT into
// the mantissa of 2^23 (0x4B0000xx = 2^23 + xx) and one FADD of -(2^23 + 128) leaves the signed code.
// No I2F is left. (2) The inner loop multiplies x by the bare codes (exact products in fp32); the scale
// multiplies the partial sum: int8 once per output (the row scale, after the warp reduction), int4 once
// per lane per 32-weight vector (all of a vector is inside one 128-group). bf16 is step 03's code.
// Why it helps: step 02's and 03's int4 run is limited by conversions, not bytes: every weight goes
// through I2F, which Hopper issues at 16 per clock per SM, an eighth of the FP32 rate.
// Napkin math (H100 SXM, datasheet figures and the measured ~3.05 TB/s read ceiling; predictions, not
// measurements), bits 4, batch 1, n 14336, k 4096: 31.2 MB of codes and scales = ~10.2 us of DRAM read.
// I2F alone: 58.7 M conversions / (132 SMs x 16 per clock) = 27.8 k clocks, ~16 us at 1.75 GHz. Here, per
// 8 int4 weights of a row: 3 shifts + 4 LOP3 + 4 bf16x2 subtractions + 8 widening shifts/masks + 8 FFMA
// = 27 instructions, plus the x widening shared by 4 rows and the loop: ~3.7 per weight, 58.7 M x 3.7 /
// (132 SMs x 128 lanes per clock) = ~13 k clocks, ~7 us: under the DRAM time, so int4 should move toward
// the byte bound (whether it reaches 90% depends on how well the issue slots hide under the loads; the
// PTX has no cvt from integer left). int8 (~3.5 instructions per weight against ~19 us of bytes) should
// close most of its gap to bf16's efficiency. bf16 is unchanged and should time as 03.
// Run: aisp bench run --targets ch19:weight_only_gemv:04_fast_dequant
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::weight_only_gemv::v04 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr int k_rows = 4;  // rows per warp
constexpr unsigned k_full_mask = 0xffffffffu;
// Blocks per SM the register budget must allow at int4 batch 1 (65536 registers / (4 x 256 threads) = 64
// a thread): without it the int4 partial sums take 76 registers and cost a block per SM, a quarter of
// the bytes in flight, where step 03 runs 4. 0 elsewhere: no minimum (nvcc then emits no .minnctapersm),
// the compiler's choice as in step 03 (same blocks per SM at every other format and batch capacity except int4 at 8: 163 registers, one
// block instead of 03's two; capped at 128 it spills).
template <int Bits, int BMax>
constexpr int k_min_blocks = Bits == 4 && BMax == 1 ? 4 : 0;

// Word i of a 16-byte vector (i is a compile-time constant wherever this is called: fully unrolled
// loops), and the two bf16 values of a word as floats: a bf16 is the top half of the float it equals.
__device__ unsigned word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ float bf16_low(unsigned u) { return __uint_as_float(u << 16); }
__device__ float bf16_high(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// A 32-bit word as a bf16 pair and back (memcpy: the type-pun the compiler reduces to a register move).
__device__ __nv_bfloat162 as_bf16x2(unsigned u) {
  __nv_bfloat162 b;
  memcpy(&b, &u, sizeof b);
  return b;
}
__device__ unsigned as_word(__nv_bfloat162 b) {
  unsigned u;
  memcpy(&u, &b, sizeof u);
  return u;
}

// Weights per 16-byte vector, and the 8-value chunks of x each vector needs.
template <int Bits>
constexpr int k_values = 128 / Bits;
template <int Bits>
constexpr int k_chunks = k_values<Bits> / 8;

// Weights 8c .. 8c + 7 of a 16-byte vector as floats, exactly: the bf16 values, or the bare int8 / int4
// codes (not scaled). Word i holds bytes 4i .. 4i + 3, little-endian: int8 weight 4i + j in bits 8j, int4
// weight 8i + j in bits 4j (even weights in low nibbles, as quant.hpp packs them).
template <int Bits>
__device__ void codes8(const uint4& v, int c, float (&q)[8]) {
  if constexpr (Bits == 16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[2 * i] = bf16_low(word_of(v, i));
      q[2 * i + 1] = bf16_high(word_of(v, i));
    }
  } else if constexpr (Bits == 8) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Flipping each byte's sign bit turns the two's complement code q into offset binary q + 128.
      const unsigned u = word_of(v, 2 * c + h) ^ 0x80808080u;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // __byte_perm (PRMT, PTX ISA "prmt"; CUDA Math API "__byte_perm"): result byte n is byte s_n of
        // {u, 0x4B000000} (indices 0-3: u, 4-7: the constant). Selector 0x754j: byte 0 = u's byte j,
        // bytes 1, 2 = 0, byte 3 = 0x4B, i.e. the float 2^23 + (q + 128): every integer below 2^24 is a
        // float, so this is exact, and subtracting 2^23 + 128 (exact by Sterbenz's lemma) leaves q.
        const unsigned biased = __byte_perm(u, 0x4B000000u, 0x7540u + j);
        q[4 * h + j] = __uint_as_float(biased) - 8388736.0f;
      }
    }
  } else {
    const unsigned u = word_of(v, c);
    // 0x4308 is bf16 136.0 = 128 + 8 (exponent 2^7, so the 7-bit mantissa counts units).
    const __nv_bfloat162 offset = as_bf16x2(0x43084308u);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      // The mask keeps nibbles m (bits 4m, low half) and m + 4 (bits 4m + 16, high half) at the bottom of
      // each half. XOR with 0x43084308 then (a) flips each nibble's top bit: two's complement n becomes
      // offset binary n + 8 in [0, 15], and (b) sets bits 0x4300 (zero after the mask): each half is the
      // bf16 128 + (n + 8), exact. (ptxas emits an AND and an XOR for it, not one LOP3: both constants
      // are immediates; step 05 writes the LOP3 out.)
      const unsigned biased = ((u >> (4 * m)) & 0x000F000Fu) ^ 0x43084308u;
      // One packed subtraction (CUDA Math API __hsub2 for __nv_bfloat162) of {136, 136}: {n_m, n_m+4},
      // exact (the difference is an integer in [-8, 7]).
      const unsigned pair = as_word(__hsub2(as_bf16x2(biased), offset));
      q[m] = bf16_low(pair);
      q[m + 4] = bf16_high(pair);
    }
  }
}

// Adds x times one 16-byte vector of each of the k_rows rows into sum[r][b]: products of bf16 x with
// the bf16 weights or the bare codes, exact in fp32, summed in fp32. Rows of x past the batch skipped by
// a warp-uniform branch, as in step 03.
template <int Bits, int BMax>
__device__ void multiply_vector(const uint4 (&raw)[k_rows], const uint4* xs, int chunks, int vecs, int v, int batch,
                                float (&sum)[k_rows][BMax]) {
#pragma unroll
  for (int c = 0; c < k_chunks<Bits>; ++c) {
    float q[k_rows][8];
#pragma unroll
    for (int r = 0; r < k_rows; ++r) codes8<Bits>(raw[r], c, q[r]);
#pragma unroll
    for (int b = 0; b < BMax; ++b) {
      if (b < batch) {
        const uint4 xv = xs[b * chunks + c * vecs + v];
        float xf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          xf[2 * i] = bf16_low(word_of(xv, i));
          xf[2 * i + 1] = bf16_high(word_of(xv, i));
        }
#pragma unroll
        for (int r = 0; r < k_rows; ++r) {
#pragma unroll
          for (int i = 0; i < 8; ++i) sum[r][b] = fmaf(xf[i], q[r][i], sum[r][b]);
        }
      }
    }
  }
}

template <int Bits, int BMax>
__global__ void __launch_bounds__(k_threads, k_min_blocks<Bits, BMax>) fast_dequant_kernel(const Args a) {
  // [batch][k / 8] chunks of 8 x values, swizzled as in step 03: chunk i of a batch row is stored at
  // (i % C) * vecs + i / C, so the lanes of a warp read a fixed c from 32 consecutive 16-byte slots.
  extern __shared__ uint4 xs[];
  constexpr int V = k_values<Bits>;
  constexpr int C = k_chunks<Bits>;
  const int vecs = a.k / V;     // 16-byte weight vectors per row (k is a multiple of 128)
  const int chunks = a.k / 8;   // = C * vecs
  const auto* xg = reinterpret_cast<const uint4*>(a.x);  // cudaMalloc'd, rows of k * 2 B: 16-byte aligned
  for (int t = threadIdx.x; t < a.batch * chunks; t += k_threads) {
    const int b = t / chunks, i = t - b * chunks;
    xs[b * chunks + (i % C) * vecs + i / C] = xg[t];
  }
  __syncthreads();  // the only barrier: no warp leaves before it

  const int lane = threadIdx.x % 32;
  const auto* w_bytes = static_cast<const std::uint8_t*>(a.w);
  const std::size_t row_bytes = static_cast<std::size_t>(a.k) * Bits / 8;  // a multiple of 64
  const int groups = a.k / k_group;
  for (int row0 = (blockIdx.x * k_warps + threadIdx.x / 32) * k_rows; row0 < a.n;
       row0 += gridDim.x * k_warps * k_rows) {
    const uint4* wrow[k_rows];
    bool valid[k_rows];
    int srow[k_rows];  // the row whose scales and addresses a lane uses: row0 for rows past n
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
      valid[r] = row0 + r < a.n;
      srow[r] = valid[r] ? row0 + r : row0;
      wrow[r] = reinterpret_cast<const uint4*>(w_bytes + srow[r] * row_bytes);
    }
    float acc[k_rows][BMax] = {};
    for (int v = lane; v < vecs; v += 32) {
      uint4 raw[k_rows];
#pragma unroll
      for (int r = 0; r < k_rows; ++r) raw[r] = valid[r] ? wrow[r][v] : make_uint4(0, 0, 0, 0);
      if constexpr (Bits == 4) {
        // Vector v covers k = 32v .. 32v + 31, inside group v / 4: its partial sum takes the group's
        // scale once (one FFMA per row and batch row per 32 weights, not one FMUL per weight).
        float scale[k_rows];
#pragma unroll
        for (int r = 0; r < k_rows; ++r) scale[r] = a.scales[static_cast<std::size_t>(srow[r]) * groups + v / 4];
        float part[k_rows][BMax] = {};
        multiply_vector<Bits, BMax>(raw, xs, chunks, vecs, v, a.batch, part);
#pragma unroll
        for (int r = 0; r < k_rows; ++r) {
#pragma unroll
          for (int b = 0; b < BMax; ++b) {
            if (b < a.batch) acc[r][b] = fmaf(part[r][b], scale[r], acc[r][b]);
          }
        }
      } else {
        multiply_vector<Bits, BMax>(raw, xs, chunks, vecs, v, a.batch, acc);
      }
    }
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
      // int8: the whole row shares one scale, so it multiplies the reduced sum, once per output.
      float row_scale = 1.0f;
      if constexpr (Bits == 8) row_scale = a.scales[srow[r]];
#pragma unroll
      for (int b = 0; b < BMax; ++b) {
        float s = acc[r][b];
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(k_full_mask, s, offset);
        if (lane == 0 && valid[r] && b < a.batch) {
          a.y[static_cast<std::size_t>(b) * a.n + row0 + r] = __float2bfloat16(s * row_scale);
        }
      }
    }
  }
}

class FastDequant {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_smem = static_cast<std::size_t>(a.batch) * a.k * sizeof(__nv_bfloat16);
    if (m_smem > static_cast<std::size_t>(a.smem_optin_bytes)) {
      throw VariantUnavailable("x (batch x k bf16, " + std::to_string(m_smem) +
                               " B) does not fit a block's shared memory (" + std::to_string(a.smem_optin_bytes) +
                               " B): this step stages all of x");
    }
    int per_sm = 0;
    with_config(a, [&]<int Bits, int BMax>() {
      const auto kernel = fast_dequant_kernel<Bits, BMax>;
      AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m_smem)));
      AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, m_smem));
      m_kernel = reinterpret_cast<const void*>(kernel);
    });
    if (per_sm == 0) throw VariantUnavailable("no block of this step fits an SM at this batch and k");
    // A full wave, but no more blocks than there are row groups for their warps.
    const int row_groups = (a.n + k_rows - 1) / k_rows;
    m_blocks = std::min(a.sm_count * per_sm, (row_groups + k_warps - 1) / k_warps);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_config(a, [&]<int Bits, int BMax>() {
      fast_dequant_kernel<Bits, BMax><<<m_blocks, k_threads, m_smem, stream>>>(a);
      AISP_CHECK_LAUNCH();
    });
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> f = standard_facts(kernel_facts(m_kernel, k_threads, m_smem));
    f.push_back({"blocks", std::to_string(m_blocks)});
    for (auto& e : error_facts(a)) f.push_back(std::move(e));
    return f;
  }

 private:
  std::size_t m_smem = 0;
  int m_blocks = 0;
  const void* m_kernel = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, FastDequant, .step = 4, .slug = "fast_dequant",
                               .kind = VariantKind::step,
                               .summary = "codes to floats by magic-number bit tricks (no I2F); scale once per partial sum");

}  // namespace aisp::ch19::weight_only_gemv::v04
