// ch19:weight_only_gemv:01_warp_per_row — the first GEMV anyone writes: one warp per output row, each
// lane strides over k one weight at a time, dequantizes it, and multiplies it into every batch row.
//
// The kernel: warp w of the grid owns row w. Lane l reads weights l, l + 32, l + 64, ... of the row with
// element-sized loads (2 bytes at bf16, 1 byte at int8; at int4 the byte holding the weight, shared by two
// neighbouring lanes, and the lane picks its nibble), dequantizes it in the inner loop (scale * code: the
// row's scale at int8, the group's scale, re-read per weight, at int4), and accumulates x[b][k] * w for
// each batch row b in fp32, x read straight from global memory (L1 keeps it). The warp then sums its 32
// lane partials with shuffles and lane 0 writes the batch's outputs. Each weight is read once whatever the
// batch: the batch loop is inside the k loop.
// Why it is a fair baseline: every weight byte is read exactly once and coalesced (a warp's loads cover
// 64, 32 or 16 contiguous bytes), the arithmetic is the minimum, and it is the loop a textbook GEMV has.
// What it lacks: bytes per load. A warp-wide load moves 64 B at bf16 and 16 B at int4, so to keep the
// ~32 KiB per SM in flight that an H100's DRAM needs (3.35 TB/s x ~1.3 us of latency over 132 SMs), the
// SM would need hundreds to thousands of loads outstanding; with at most 64 warps and one dependent load
// per iteration it has a few. Every weight also costs an int-to-float conversion (I2F, a quarter-rate
// instruction on Hopper) and a multiply before its FMA.
// Napkin math (H100 SXM datasheet, batch 1): 2-byte loads, 64 warps x 64 B in flight per SM = 4 KiB: ~1/8
// of what DRAM needs, so expect ~10-15% of the DRAM read ceiling at bf16, and less at int4 (16 B per
// warp-load): the quantized formats are not faster here, the bytes saved are not the bottleneck yet.
// Run: aisp bench run --targets ch19:weight_only_gemv:01_warp_per_row
#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::weight_only_gemv::v01 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr unsigned k_full_mask = 0xffffffffu;

// Weight (row, kk) dequantized: scale * code for the quantized formats.
template <int Bits>
__device__ float load_weight(const Args& a, int row, int kk) {
  const std::size_t idx = static_cast<std::size_t>(row) * a.k + kk;
  if constexpr (Bits == 16) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(a.w)[idx]);
  } else if constexpr (Bits == 8) {
    return a.scales[row] * static_cast<float>(static_cast<const std::int8_t*>(a.w)[idx]);
  } else {
    const std::uint8_t byte = static_cast<const std::uint8_t*>(a.w)[idx / 2];
    // Even weights in the low nibble (k is even, so idx and kk agree on parity); the int8 casts and the
    // arithmetic shift sign-extend the 4-bit two's complement code.
    const int code = kk % 2 == 0 ? static_cast<std::int8_t>(byte << 4) >> 4 : static_cast<std::int8_t>(byte) >> 4;
    return a.scales[static_cast<std::size_t>(row) * (a.k / k_group) + kk / k_group] * static_cast<float>(code);
  }
}

template <int Bits, int BMax>
__global__ void __launch_bounds__(k_threads) warp_per_row_kernel(const Args a) {
  const int row = blockIdx.x * k_warps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.n) return;  // the whole warp leaves together: no shuffle below misses a lane

  float acc[BMax] = {};
  for (int kk = lane; kk < a.k; kk += 32) {
    const float w = load_weight<Bits>(a, row, kk);
#pragma unroll
    for (int b = 0; b < BMax; ++b) {
      if (b < a.batch) acc[b] = fmaf(__bfloat162float(a.x[static_cast<std::size_t>(b) * a.k + kk]), w, acc[b]);
    }
  }
#pragma unroll
  for (int b = 0; b < BMax; ++b) {
    float s = acc[b];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(k_full_mask, s, offset);
    if (lane == 0 && b < a.batch) a.y[static_cast<std::size_t>(b) * a.n + row] = __float2bfloat16(s);
  }
}

const void* kernel_for(const Args& a) {
  return with_config(a, [&]<int Bits, int BMax>() {
    return reinterpret_cast<const void*>(warp_per_row_kernel<Bits, BMax>);
  });
}

void launch(const Args& a, cudaStream_t stream) {
  const int blocks = (a.n + k_warps - 1) / k_warps;
  with_config(a, [&]<int Bits, int BMax>() {
    warp_per_row_kernel<Bits, BMax><<<blocks, k_threads, 0, stream>>>(a);
    AISP_CHECK_LAUNCH();
  });
}

std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> f = standard_facts(kernel_facts(kernel_for(a), k_threads));
  for (auto& e : error_facts(a)) f.push_back(std::move(e));
  return f;
}

AISP_REGISTER_VARIANT_WITH_FACTS(WeightOnlyGemvProblem, launch, facts, .step = 1, .slug = "warp_per_row",
                                 .kind = VariantKind::baseline,
                                 .summary = "warp per row, element-sized loads, dequantize per weight, x from global");

}  // namespace aisp::ch19::weight_only_gemv::v01
