// ch19:weight_only_gemv:02_vectorized — 16-byte weight loads dequantized in registers, x staged once per
// block in shared memory.
//
// What changed: (1) each lane loads 16 bytes of its row at a time (8 bf16, 16 int8 or 32 int4 weights),
// consecutive lanes consecutive vectors, so a warp-wide load moves 512 contiguous bytes instead of 64, 32
// or 16; the vector is unpacked and dequantized in registers, 8 weights at a time. (2) x no longer comes
// from global memory per weight: each block copies all of x (batch x k bf16) into shared memory once, and
// then its warps loop over rows (grid-stride, a full wave of blocks from the occupancy calculator), so the
// copy is paid once per resident block rather than once per row. The chunks of x are stored swizzled
// (stage_x) so that the lanes of a warp, whose weight vectors cover 8, 16 or 32 consecutive k each, read
// x with conflict-free 16-byte shared loads.
// Why it helps: bytes in flight. One load per lane now moves 16 B, 8x (bf16) to 32x (int4) what step 01's
// did, so the same number of outstanding loads covers far more of DRAM's latency; and the x traffic moves
// from L1/L2 to shared memory, read 16 B at a time.
// Limit: all of x must fit a block's shared memory (batch x k x 2 B: 128 KiB at batch 16, k = 4096); a
// larger x is SKIPPED with the reason (the down projection, k = 14336, at batch 8 and more).
// Napkin math (H100 SXM datasheet, batch 1): with ~32 warps per SM and one 16-byte load in flight per
// lane, 16 KiB per SM: about half of the ~32 KiB DRAM needs, so expect ~50-70% of the DRAM read ceiling
// at bf16 and int8. int4 should do worse: its 58.7 M weights each still need an int-to-float conversion
// (I2F, 16 per clock per SM on Hopper: ~15 us at 1.75 GHz over 132 SMs) against ~10 us for its bytes.
// Run: aisp bench run --targets ch19:weight_only_gemv:02_vectorized
#include <algorithm>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::weight_only_gemv::v02 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
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

// Two blocks per SM (at most 128 registers a thread): without that bound ptxas (CUDA 13.0) gives the int8
// batch-16 variant 48 registers and a spill; every variant fits in 128 without one.
template <int Bits, int BMax>
__global__ void __launch_bounds__(k_threads, 2) vectorized_kernel(const Args a) {
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
  for (int row = blockIdx.x * k_warps + threadIdx.x / 32; row < a.n; row += gridDim.x * k_warps) {
    const auto* wrow = reinterpret_cast<const uint4*>(w_bytes + row * row_bytes);
    float row_scale = 1.0f;
    if constexpr (Bits == 8) row_scale = a.scales[row];
    float acc[BMax] = {};
    // One vector per lane per iteration, not unrolled: one 16-byte load in flight per lane is this step's
    // design (step 03 issues several); it also keeps the batch-16 variants' registers from spilling.
#pragma unroll 1
    for (int v = lane; v < vecs; v += 32) {
      const uint4 raw = wrow[v];
      float scale = row_scale;
      // Vector v covers k = 32v .. 32v + 31, inside group v / 4.
      if constexpr (Bits == 4) scale = a.scales[static_cast<std::size_t>(row) * (a.k / k_group) + v / 4];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float w[8];
        dequant8<Bits>(raw, c, scale, w);
#pragma unroll
        for (int b = 0; b < BMax; ++b) {
          if (b < a.batch) {
            const uint4 xv = xs[b * chunks + c * vecs + v];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              acc[b] = fmaf(bf16_low(word_of(xv, i)), w[2 * i], acc[b]);
              acc[b] = fmaf(bf16_high(word_of(xv, i)), w[2 * i + 1], acc[b]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int b = 0; b < BMax; ++b) {
      float s = acc[b];
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(k_full_mask, s, offset);
      if (lane == 0 && b < a.batch) a.y[static_cast<std::size_t>(b) * a.n + row] = __float2bfloat16(s);
    }
  }
}

class Vectorized {
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
      const auto kernel = vectorized_kernel<Bits, BMax>;
      AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m_smem)));
      AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, m_smem));
      m_kernel = reinterpret_cast<const void*>(kernel);
    });
    if (per_sm == 0) throw VariantUnavailable("no block of this step fits an SM at this batch and k");
    // A full wave, but no more blocks than there are rows for their warps.
    m_blocks = std::min(a.sm_count * per_sm, (a.n + k_warps - 1) / k_warps);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_config(a, [&]<int Bits, int BMax>() {
      vectorized_kernel<Bits, BMax><<<m_blocks, k_threads, m_smem, stream>>>(a);
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

AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, Vectorized, .step = 2, .slug = "vectorized",
                               .kind = VariantKind::step,
                               .summary = "16-byte weight loads dequantized in registers, x in shared memory, full wave");

}  // namespace aisp::ch19::weight_only_gemv::v02
