// ch19:weight_only_gemv:05_tensor_core — the multiply moves to the tensor cores: codes become bf16
// pairs (04's bit trick, without widening them to fp32) that feed mma.sync, with the batch as the MMA's N.
//
// What changed (against 04_fast_dequant): 04's inner loop spent most of its instructions on the ALU pipe
// (shifts and masks to widen each bf16 to fp32, an AND and an XOR per nibble pair) and one FFMA per
// weight and batch row. Here a bf16 pair is the operand as it comes out of the dequantization, and one
// mma.sync.m16n8k16 (bf16 in, fp32 accumulation: PTX ISA, "Warp-level matrix multiply-accumulate
// instructions", fragment layouts for .m16n8k16) does 16 rows x 16 k x 8 batch columns. The MMA's
// operands dictate the rest, which is why this step changes more than one line of 04: an MMA tile is 16
// rows, so a block works on 16-row tiles and its 8 warps split k between them (a "k-step" is 4 lanes'
// 16-byte vectors of a row: 32 bf16, 64 int8 or 128 int4 weights, one int4 scale group), the warps' 16 x
// batch partial sums meet in shared memory, and the grid is persistent (one wave, tiles strided over the
// blocks) so that x is staged once per block and each lane's next loads are issued before the current
// math (the round structure below).
// The order of k inside an MMA does not matter to a dot product, so each format keeps the pair order its
// dequantization produces and x is staged in that order: int4 nibbles m and m + 4 of a word come out as
// one pair, so x is staged as pairs {x[8j + m], x[8j + m + 4]} (four PRMTs per 8 values, once per block);
// int8 bytes become pairs {2p, 2p + 1} (04's exact 2^23 trick, then one cvt packs two floats into a bf16
// pair: |code| <= 127 needs 7 significant bits, bf16 has 8); bf16 weights are already pairs.
// Why it should help (profile of 04 on an H200, int4 batch 1: issue slots 65% busy, ALU pipe 67.8%,
// math_pipe_throttle the third stall): per 16 int4 weights of a lane (two rows' words) this is 6 shifts,
// 8 LOP3 and 8 packed bf16 subtractions, a 16-byte shared load of x per word and 2 MMAs: ~1.5
// instructions per weight, ~0.9 of them on the ALU pipe; and at batch 4-16 one MMA replaces 16 x 8 x 16
// FFMAs, so those batches leave the FP32 pipes entirely (their FLOPs are declared as bf16 tensor work).
// Napkin math (H200, measured DRAM read ceiling ~4.5 TB/s; predictions, not measurements), int4 batch 1,
// n 14336, k 4096: 31.2 MB = ~7 us of DRAM. ALU: 58.7 M weights x 0.9 / 32 lanes x 2 issue cycles /
// (132 SMs x 4 schedulers) = ~6.3 k cycles = ~3.2 us at 1.98 GHz: under the bytes. The price: at batch 1
// seven of the MMA's eight columns multiply a copy of x (the tensor pipe has room for it), the partial
// sums of 8 warps go through shared memory per tile, and the double-buffered rounds hold ~125 registers
// a thread (2 blocks per SM). bf16 and int8 gain nothing from fewer conversions at batch 1 (they had none
// or cheap ones), so there only the layout changes and they may lose; the README has the measurements.
// Run: aisp bench run --targets ch19:weight_only_gemv:05_tensor_core
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::weight_only_gemv::v05 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr int k_tile_rows = 16;  // the MMA's M: rows a block owns
constexpr int k_depth = 4;       // k-steps whose loads a lane issues before it computes
constexpr int k_pad = 4;         // 16-byte slots after each batch row of staged x (next comment)

// Weights per 16-byte vector, 8-value chunks of x per vector, and k per k-step (4 lanes' vectors).
template <int Bits>
constexpr int k_values = 128 / Bits;
template <int Bits>
constexpr int k_chunks = k_values<Bits> / 8;
template <int Bits>
constexpr int k_step = 4 * k_values<Bits>;

__device__ unsigned word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

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

// Where chunk q of lane t's vector in k-step s of batch row b lives in shared memory: the 4 lanes of a
// k-step read one chunk index together, so their 4 chunks are adjacent (64 contiguous bytes, no bank
// conflict), and a batch row is k / 8 + k_pad slots long: 64 B more than a multiple of 128 B, so the
// rows read by lanes with neighbouring batch columns fall on the two halves of the banks.
template <int Bits>
__device__ int x_slot(int b, int s, int q, int t, int pitch) {
  return b * pitch + (s * k_chunks<Bits> + q) * 4 + t;
}

// (a & b) ^ c in one LOP3 (PTX ISA "lop3": immLut = (0xF0 & 0xCC) ^ 0xAA = 0x6A). Written out because
// with both constants as immediates ptxas emits an AND and an XOR: a third of 04's int4 ALU work.
__device__ unsigned and_xor(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The 4 bf16 pairs of chunk q (8 weights) of one 16-byte vector, exactly, in the pair order x is staged
// in. The low half of a pair is the weight the low half of x's pair multiplies. Codes are not scaled.
template <int Bits>
__device__ void pairs_of(const uint4& v, int q, unsigned (&p)[4]) {
  if constexpr (Bits == 16) {
    p[0] = v.x, p[1] = v.y, p[2] = v.z, p[3] = v.w;  // one chunk per vector: bf16 pairs {2p, 2p + 1}
  } else if constexpr (Bits == 8) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // 04's trick: the sign-flipped byte under the exponent of 2^23 (one PRMT), minus 2^23 + 128.
      const unsigned u = word_of(v, 2 * q + h) ^ 0x80808080u;
      float f[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) f[j] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7540u + j)) - 8388736.0f;
      // __floats2bfloat162_rn(lo, hi): one cvt.rn.bf16x2.f32, exact for an integer of at most 8 bits.
      p[2 * h] = as_word(__floats2bfloat162_rn(f[0], f[1]));
      p[2 * h + 1] = as_word(__floats2bfloat162_rn(f[2], f[3]));
    }
  } else {
    // 04's trick: nibbles m and m + 4 under the bf16 exponent of 128, offset binary, minus {136, 136}.
    const unsigned u = word_of(v, q);
    const __nv_bfloat162 offset = as_bf16x2(0x43084308u);
#pragma unroll
    for (int m = 0; m < 4; ++m) p[m] = as_word(__hsub2(as_bf16x2(and_xor(u >> (4 * m), 0x000F000Fu, 0x43084308u)), offset));
  }
}

// Eight x values (one 16-byte chunk, k ascending) as the pairs the int4 weights come in: {x_m, x_m+4}.
// __byte_perm selector 0x5410 takes the low halves of (a, b), 0x7632 the high halves (PTX ISA "prmt").
__device__ uint4 int4_pair_order(const uint4& x) {
  return make_uint4(__byte_perm(x.x, x.z, 0x5410u), __byte_perm(x.x, x.z, 0x7632u), __byte_perm(x.y, x.w, 0x5410u),
                    __byte_perm(x.y, x.w, 0x7632u));
}

// D += A B for one 16 x 8 x 16 tile, bf16 in, fp32 accumulate. A: row g = lane / 4 and g + 8, k pairs
// 2t and 2t + 8 (t = lane % 4); B: column g, the same k pairs; D: rows g, g + 8, columns 2t, 2t + 1.
__device__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One k-step of a lane: its vectors of rows g and g + 8 times x, into d[n-tile][4]. NT n-tiles of 8
// batch columns; lane g of a tile reads batch row xrow[nt] (its column, or the last batch row where the
// column is past the batch: a copy of a real column, computed and never written, costs nothing where
// zeros would cost a register clear and a predicate per load; at batch 1 all 8 lanes of a t read the same
// x, one broadcast). s_x is the k-step x is read at (a k-step past the row reads x's last one against
// zero weights).
template <int Bits, int NT>
__device__ void multiply_step(const uint4& wg, const uint4& wg8, const uint4* xs, int s_x, int t, int pitch,
                              const int (&xrow)[NT], float (&d)[NT][4]) {
#pragma unroll
  for (int q = 0; q < k_chunks<Bits>; ++q) {
    unsigned pg[4], pg8[4];
    pairs_of<Bits>(wg, q, pg);
    pairs_of<Bits>(wg8, q, pg8);
    const unsigned a0[4] = {pg[0], pg8[0], pg[1], pg8[1]};
    const unsigned a1[4] = {pg[2], pg8[2], pg[3], pg8[3]};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4 xv = xs[x_slot<Bits>(xrow[nt], s_x, q, t, pitch)];
      mma_bf16(d[nt], a0, xv.x, xv.y);
      mma_bf16(d[nt], a1, xv.z, xv.w);
    }
  }
}

// One round of a lane's loads: k-steps s0, s0 + 8, ... (k_depth of them) of rows g and g + 8 of the
// block's tile (vector 4s + t of each row), and at int4 the two rows' scales of group s (an int4 k-step
// is one group). Rows past n and k-steps past the row load zeros (code 0 in every format).
struct Round {
  uint4 wg[k_depth], wg8[k_depth];
  float sg[k_depth], sg8[k_depth];
};

template <int Bits>
__device__ void load_round(Round& r, const Args& a, int row_g, int s0, int t) {
  const int steps = a.k / k_step<Bits>;
  const int groups = a.k / k_group;
  const std::size_t row_bytes = static_cast<std::size_t>(a.k) * Bits / 8;
  const int row_g8 = row_g + 8;
  const bool valid_g = row_g < a.n, valid_g8 = row_g8 < a.n;
  const auto* w_bytes = static_cast<const std::uint8_t*>(a.w);
  const auto* wrow_g = reinterpret_cast<const uint4*>(w_bytes + (valid_g ? row_g : 0) * row_bytes);
  const auto* wrow_g8 = reinterpret_cast<const uint4*>(w_bytes + (valid_g8 ? row_g8 : 0) * row_bytes);
#pragma unroll
  for (int i = 0; i < k_depth; ++i) {
    const int s = s0 + i * k_warps;
    const bool in = s < steps;
    r.wg[i] = in && valid_g ? wrow_g[4 * s + t] : make_uint4(0, 0, 0, 0);
    r.wg8[i] = in && valid_g8 ? wrow_g8[4 * s + t] : make_uint4(0, 0, 0, 0);
    if constexpr (Bits == 4) {
      r.sg[i] = in && valid_g ? a.scales[static_cast<std::size_t>(row_g) * groups + s] : 0.0f;
      r.sg8[i] = in && valid_g8 ? a.scales[static_cast<std::size_t>(row_g8) * groups + s] : 0.0f;
    }
  }
}

// The math of one round into acc, with no branch between its k-steps: each k-step sums into its own
// fragment, so the k_depth chains of MMAs are independent (an MMA waits for the previous one into the
// same accumulator) and the scheduler can interleave them; then each is scaled (int4: the group's scale)
// and added.
template <int Bits, int NT>
__device__ void multiply_round(const Round& r, const uint4* xs, int steps, int s0, int t, int pitch,
                               const int (&xrow)[NT], float (&acc)[NT][4]) {
  float d[k_depth][NT][4] = {};
#pragma unroll
  for (int i = 0; i < k_depth; ++i) {
    multiply_step<Bits, NT>(r.wg[i], r.wg8[i], xs, min(s0 + i * k_warps, steps - 1), t, pitch, xrow, d[i]);
  }
#pragma unroll
  for (int i = 0; i < k_depth; ++i) {
    const float scale_g = Bits == 4 ? r.sg[i] : 1.0f, scale_g8 = Bits == 4 ? r.sg8[i] : 1.0f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      acc[nt][0] = fmaf(d[i][nt][0], scale_g, acc[nt][0]);
      acc[nt][1] = fmaf(d[i][nt][1], scale_g, acc[nt][1]);
      acc[nt][2] = fmaf(d[i][nt][2], scale_g8, acc[nt][2]);
      acc[nt][3] = fmaf(d[i][nt][3], scale_g8, acc[nt][3]);
    }
  }
}

// A persistent grid: block b takes 16-row tiles b, b + gridDim.x, ...; each warp walks its rounds of
// every tile in order and issues the next round's loads (of this tile, or the first of its next tile)
// before the math of the current one, so that its bytes stay in flight while it computes and across
// tiles, and x is staged once per block, not once per tile.
template <int Bits, int BMax>
__global__ void __launch_bounds__(k_threads) tensor_core_kernel(const Args a) {
  constexpr int NT = (BMax + 7) / 8;
  extern __shared__ uint4 xs[];                          // [batch][pitch] 16-byte slots (x_slot)
  __shared__ float partial[k_warps][k_tile_rows][BMax];  // each warp's sums, reduced per tile

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int tiles = (a.n + k_tile_rows - 1) / k_tile_rows;
  const int steps = a.k / k_step<Bits>;
  const int per_round = k_warps * k_depth;
  const int rounds = (steps + per_round - 1) / per_round;  // the same for every warp

  Round next;
  load_round<Bits>(next, a, blockIdx.x * k_tile_rows + g, warp, t);

  // x, staged once per block in pair order, while the first loads are in flight.
  const int pitch = a.k / 8 + k_pad;
  const auto* xg = reinterpret_cast<const uint4*>(a.x);  // cudaMalloc'd, rows of k * 2 B: 16-byte aligned
  const int chunks = a.k / 8;
  for (int i = threadIdx.x; i < a.batch * chunks; i += k_threads) {
    const int b = i / chunks, c = i - b * chunks;
    const int v = c / k_chunks<Bits>, q = c % k_chunks<Bits>;
    uint4 x = xg[i];
    if constexpr (Bits == 4) x = int4_pair_order(x);
    xs[x_slot<Bits>(b, v / 4, q, v % 4, pitch)] = x;
  }
  __syncthreads();

  int xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = min(nt * 8 + g, a.batch - 1);
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float acc[NT][4] = {};
    for (int r = 0; r < rounds; ++r) {
      const Round cur = next;
      const int s0 = warp + r * per_round;
      if (r + 1 < rounds) {
        load_round<Bits>(next, a, tile * k_tile_rows + g, s0 + per_round, t);
      } else if (tile + static_cast<int>(gridDim.x) < tiles) {
        load_round<Bits>(next, a, (tile + gridDim.x) * k_tile_rows + g, warp, t);
      }
      multiply_round<Bits, NT>(cur, xs, steps, s0, t, pitch, xrow, acc);
    }

    // Each warp's 16 x batch sums (lane: rows g, g + 8, columns 2t, 2t + 1 of each n-tile), then one
    // thread per output adds the 8 warps' sums in warp order.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = nt * 8 + 2 * t + j;
        if (col < BMax) {
          partial[warp][g][col] = acc[nt][j];
          partial[warp][g + 8][col] = acc[nt][2 + j];
        }
      }
    }
    __syncthreads();
    const int row0 = tile * k_tile_rows;
    for (int i = threadIdx.x; i < k_tile_rows * a.batch; i += k_threads) {
      const int row = i % k_tile_rows, b = i / k_tile_rows;
      if (row0 + row >= a.n) continue;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < k_warps; ++w) sum += partial[w][row][b];
      if constexpr (Bits == 8) sum *= a.scales[row0 + row];  // int8: one scale per row, once per output
      a.y[static_cast<std::size_t>(b) * a.n + row0 + row] = __float2bfloat16(sum);
    }
    __syncthreads();  // partial is written again by the next tile
  }
}

class TensorCore {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_smem = static_cast<std::size_t>(a.batch) * (a.k / 8 + k_pad) * sizeof(uint4);
    int per_sm = 0;
    with_config(a, [&]<int Bits, int BMax>() {
      const auto kernel = tensor_core_kernel<Bits, BMax>;
      cudaFuncAttributes attributes{};
      AISP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
      if (m_smem + attributes.sharedSizeBytes > static_cast<std::size_t>(a.smem_optin_bytes)) {
        throw VariantUnavailable("x (batch x k bf16, " + std::to_string(m_smem) +
                                 " B with padding) does not fit a block's shared memory (" +
                                 std::to_string(a.smem_optin_bytes) + " B): this step stages all of x");
      }
      AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m_smem)));
      AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, m_smem));
      m_kernel = reinterpret_cast<const void*>(kernel);
    });
    if (per_sm == 0) throw VariantUnavailable("no block of this step fits an SM at this batch and k");
    // A full wave, but no more blocks than tiles.
    m_blocks = std::min(a.sm_count * per_sm, (a.n + k_tile_rows - 1) / k_tile_rows);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_config(a, [&]<int Bits, int BMax>() {
      tensor_core_kernel<Bits, BMax><<<m_blocks, k_threads, m_smem, stream>>>(a);
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

AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, TensorCore, .step = 5, .slug = "tensor_core",
                               .kind = VariantKind::optimized,
                               .summary = "bf16 pairs from the codes feed mma.sync (batch as N); a block per 16 "
                                          "rows, k split over its warps, loads issued before x is staged",
                               .min_cc = 80, .precision = "bf16");

}  // namespace aisp::ch19::weight_only_gemv::v05
