// ch07:gather:03_sorted_dedup — sort the lookups by row, read each repeated row once per group.
//
// What changed: inside the launch (so it is timed), CUB's radix sort orders the (row, position) pairs by
// row; repeats of a row become neighbours. A warp then owns a group of 8 consecutive sorted lookups: it
// loads a row only when the row changes within the group and stores the registers it holds to every
// output position that asked for that row. The output is the same rows in the same (lookup) order.
// Why it should help: step 02 reads a popular row once per lookup (rank 0 alone is ~6% of them), from
// DRAM the first time and from L2 after; here a run of repeats costs one read per group, and the
// distinct rows are read in address order. Why it may not: the sort is extra work in the timed launch
// (a few passes over 32768 pairs, several small kernels), and the L2 already absorbed the repeats'
// DRAM traffic in step 02, so only the L2->SM traffic shrinks. The DRAM floor is unchanged.
// Napkin math: the same 366 MB; the sort of 32768 pairs on 17-bit keys costs some microseconds against
// a ~90 us floor.
// Run: aisp bench run --targets ch07:gather:03_sorted_dedup
#include <cub/device/device_radix_sort.cuh>

#include "chapters/ch07_memory_access/gather/problem.hpp"

namespace aisp::ch07::gather::v03 {

constexpr int k_unroll = 4;  // 16-byte vectors each lane holds per chunk of a row
constexpr int k_group = 8;   // sorted lookups per warp: a row is read at most once per group

__global__ void iota_kernel(std::uint32_t* p, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = static_cast<std::uint32_t>(i);
}

__global__ void gather_sorted_kernel(const __nv_bfloat16* __restrict__ table,
                                     const std::uint32_t* __restrict__ rows,
                                     const std::uint32_t* __restrict__ positions,
                                     __nv_bfloat16* __restrict__ out, std::int64_t dim, std::int64_t lookups) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  const std::int64_t vecs = dim / 8;
  const std::int64_t groups = (lookups + k_group - 1) / k_group;
  for (std::int64_t g = warp; g < groups; g += warps) {
    const std::int64_t first = g * k_group;
    const std::int64_t last = first + k_group < lookups ? first + k_group : lookups;
    // A chunk of 32 x k_unroll vectors of the row at a time, so the registers held stay bounded.
    for (std::int64_t v = lane; v < vecs; v += 32 * k_unroll) {
      uint4 r[k_unroll] = {};
      std::int64_t held = -1;  // the row whose chunk `r` holds (the same in every lane)
      for (std::int64_t k = first; k < last; ++k) {
        const std::int64_t row = rows[k];
        if (row != held) {
          const auto* src = reinterpret_cast<const uint4*>(table + row * dim);
#pragma unroll
          for (int u = 0; u < k_unroll; ++u) {
            if (v + 32 * u < vecs) r[u] = src[v + 32 * u];
          }
          held = row;
        }
        auto* dst = reinterpret_cast<uint4*>(out + static_cast<std::int64_t>(positions[k]) * dim);
#pragma unroll
        for (int u = 0; u < k_unroll; ++u) {
          if (v + 32 * u < vecs) dst[v + 32 * u] = r[u];
        }
      }
    }
  }
}

class SortedDedup {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    const auto n = static_cast<std::size_t>(a.lookups);
    m_positions_in = DeviceBuffer<std::uint32_t>(n);
    m_rows = DeviceBuffer<std::uint32_t>(n);
    m_positions = DeviceBuffer<std::uint32_t>(n);
    iota_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(m_positions_in.data(), a.lookups);
    AISP_CHECK_LAUNCH();
    // Only the bits a row index can have are sorted: 17 passes' worth of bits for a 2^17-row table.
    m_end_bit = 1;
    while (m_end_bit < 32 && (std::int64_t{1} << m_end_bit) < a.vocab) ++m_end_bit;
    std::size_t temp = 0;
    AISP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, keys(a), m_rows.data(),
                                                    m_positions_in.data(), m_positions.data(),
                                                    static_cast<std::int64_t>(n), 0, m_end_bit, stream));
    m_temp = DeviceBuffer<unsigned char>(temp);
  }

  void launch(const Args& a, cudaStream_t stream) {
    std::size_t temp = m_temp.size();
    AISP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(m_temp.data(), temp, keys(a), m_rows.data(),
                                                    m_positions_in.data(), m_positions.data(), a.lookups, 0,
                                                    m_end_bit, stream));
    constexpr int threads = 256;
    gather_sorted_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(
        a.table, m_rows.data(), m_positions.data(), a.out, a.dim, a.lookups);
    AISP_CHECK_LAUNCH();
  }

 private:
  // Indices are non-negative int32: sorting them as uint32 keeps their order.
  static const std::uint32_t* keys(const Args& a) { return reinterpret_cast<const std::uint32_t*>(a.indices); }

  DeviceBuffer<std::uint32_t> m_positions_in;  // 0, 1, ..., lookups-1: the values sorted with the keys
  DeviceBuffer<std::uint32_t> m_rows;
  DeviceBuffer<std::uint32_t> m_positions;
  DeviceBuffer<unsigned char> m_temp;
  int m_end_bit = 32;
};

AISP_REGISTER_STATEFUL_VARIANT(GatherProblem, SortedDedup, .step = 3, .slug = "sorted_dedup",
                               .kind = VariantKind::optimized,
                               .summary = "radix-sort lookups by row in the launch; a repeated row is read "
                                          "once per group of 8");

}  // namespace aisp::ch07::gather::v03
