// ch19:weight_only_gemv:03_rows_per_warp — each warp computes 4 rows at once: 4 independent 16-byte
// loads in flight per lane, and every x value read from shared memory serves 4 rows.
//
// What changed: the warp's unit of work is a group of 4 consecutive rows instead of one. Per iteration a
// lane first issues the loads of its vector in all 4 rows (independent, so all 4 are in flight together),
// then dequantizes them, then reads each 8-value chunk of x from shared memory once and multiplies it into
// the 4 rows' accumulators (4 x batch of them per lane). A group that runs past n loads zeros for the
// missing rows and does not write them.
// Why it helps: (1) at batch 1 the kernel is bytes-in-flight bound (Little's law: ~32 KiB per SM on an
// H100 at 3.35 TB/s); 4 loads per lane outstanding give each warp 2 KiB in flight instead of 512 B, so
// fewer resident warps suffice. (2) At larger batches, step 02 reads 2 B of x from shared memory per
// weight per batch row, one FMA's worth: an SM's shared memory delivers 128 B per clock against 128 FMAs,
// so x reads, not FMAs, set the pace; here each x read feeds 4 FMAs and the FP32 rate becomes the limit.
// Napkin math (H100 SXM datasheet): batch 1 bf16/int8, expect ~80-90% of the DRAM read ceiling; int4 stays
// conversion-bound (every weight still goes through I2F). Batch 16: 2 x 16 x 14336 x 4096 = 1.9 GFLOP at
// 67 TFLOP/s FP32 = 28 us, above every format's DRAM time (35 / 18 / 9.4 us): the report's "% of ceiling"
// is then against the FP32 rate.
// Run: aisp bench run --targets ch19:weight_only_gemv:03_rows_per_warp
#include <algorithm>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::weight_only_gemv::v03 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr int k_rows = 4;  // rows per warp
constexpr unsigned k_full_mask = 0xffffffffu;

// Word i of a 16-byte vector (i is a compile-time constant wherever this is called: fully unrolled
// loops), and the two bf16 values of a word as floats: a bf16 is the top half of the float it equals.
__device__ unsigned word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ float bf16_low(unsigned u) { return __uint_as_float(u << 16); }
__device__ float bf16_high(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// Weights per 16-byte vector, and the 8-value chunks of x each vector needs.
template <int Bits>
constexpr int k_values = 128 / Bits;
template <int Bits>
constexpr int k_chunks = k_values<Bits> / 8;

// Weights 8c .. 8c + 7 of a 16-byte vector, dequantized (scale * code; bf16 needs no scale). Word i
// holds bytes 4i .. 4i + 3, little-endian: int8 weight 4i + j in bits 8j, int4 weight 8i + j in bits 4j
// (even weights in low nibbles, as quant.hpp packs them).
template <int Bits>
__device__ void dequant8(const uint4& v, int c, float scale, float (&w)[8]) {
  if constexpr (Bits == 16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[2 * i] = bf16_low(word_of(v, i));
      w[2 * i + 1] = bf16_high(word_of(v, i));
    }
  } else if constexpr (Bits == 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const unsigned u = word_of(v, 2 * c + j / 4);
      // Byte j % 4 to the top, then an arithmetic shift back sign-extends it.
      w[j] = scale * static_cast<float>(static_cast<int>(u << (24 - 8 * (j % 4))) >> 24);
    }
  } else {
    const unsigned u = word_of(v, c);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // Shift nibble j to the top, then an arithmetic shift back sign-extends it.
      w[j] = scale * static_cast<float>(static_cast<int>(u << (28 - 4 * j)) >> 28);
    }
  }
}

template <int Bits, int BMax>
__global__ void __launch_bounds__(k_threads) rows_per_warp_kernel(const Args a) {
  // [batch][k / 8] chunks of 8 x values. Chunk i of a batch row is stored at (i % C) * vecs + i / C,
  // C = chunks per weight vector: the lane holding vector v reads its chunk c at c * vecs + v, so for a
  // fixed c the warp reads 32 consecutive 16-byte slots (conflict-free) instead of slots C apart.
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
    float row_scale[k_rows];
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
      valid[r] = row0 + r < a.n;
      srow[r] = valid[r] ? row0 + r : row0;
      wrow[r] = reinterpret_cast<const uint4*>(w_bytes + srow[r] * row_bytes);
      row_scale[r] = 1.0f;
      if constexpr (Bits == 8) row_scale[r] = a.scales[srow[r]];
    }
    float acc[k_rows][BMax] = {};
    for (int v = lane; v < vecs; v += 32) {
      uint4 raw[k_rows];
#pragma unroll
      for (int r = 0; r < k_rows; ++r) raw[r] = valid[r] ? wrow[r][v] : make_uint4(0, 0, 0, 0);
      float scale[k_rows];
#pragma unroll
      for (int r = 0; r < k_rows; ++r) {
        scale[r] = row_scale[r];
        // Vector v covers k = 32v .. 32v + 31, inside group v / 4.
        if constexpr (Bits == 4) scale[r] = a.scales[static_cast<std::size_t>(srow[r]) * groups + v / 4];
      }
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float w[k_rows][8];
#pragma unroll
        for (int r = 0; r < k_rows; ++r) dequant8<Bits>(raw[r], c, scale[r], w[r]);
#pragma unroll
        for (int b = 0; b < BMax; ++b) {
          if (b < a.batch) {
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
              for (int i = 0; i < 8; ++i) acc[r][b] = fmaf(xf[i], w[r][i], acc[r][b]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
#pragma unroll
      for (int b = 0; b < BMax; ++b) {
        float s = acc[r][b];
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(k_full_mask, s, offset);
        if (lane == 0 && valid[r] && b < a.batch) {
          a.y[static_cast<std::size_t>(b) * a.n + row0 + r] = __float2bfloat16(s);
        }
      }
    }
  }
}

class RowsPerWarp {
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
      const auto kernel = rows_per_warp_kernel<Bits, BMax>;
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
      rows_per_warp_kernel<Bits, BMax><<<m_blocks, k_threads, m_smem, stream>>>(a);
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

AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, RowsPerWarp, .step = 3, .slug = "rows_per_warp",
                               .kind = VariantKind::step,
                               .summary = "4 rows per warp: 4 loads in flight per lane, each x read serves 4 rows");

}  // namespace aisp::ch19::weight_only_gemv::v03
