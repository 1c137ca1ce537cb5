// ch07:gather — the contract of the gather ladder: an embedding lookup, out[l][:] = table[idx[l]][:].
//
// A table of `vocab` rows of `dim` bf16 values (default 131072 x 4096 = 1 GiB, a large language model's
// token embedding) and `lookups` int32 indices (default 32768 tokens) drawn from a Zipf law: a few rows
// are read very often, most never (reference.hpp). The output is `lookups` rows in lookup order.
//
// Declared bytes, and why duplicates are not counted: a row read twice need not cross DRAM twice (the
// second read can come from L2, or be skipped by the dedup step), so the minimum DRAM traffic is every
// *distinct* row read once, plus the indices, plus every output row written once:
//   bytes_read = distinct_rows * dim * 2 + lookups * 4, bytes_written = lookups * dim * 2.
// With the defaults 11913 of the 32768 lookups are distinct rows: 97.7 MB read, 268.4 MB written. The
// distinct count does not depend on the seed (the seed permutes which rows are popular, not how many
// there are), so it is computed once from the axes.
#pragma once

#include <cuda_bf16.h>

#include <stdexcept>

#include "chapters/ch07_memory_access/gather/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch07::gather {

struct Args {
  const __nv_bfloat16* table;  // vocab x dim, row-major
  const std::int32_t* indices;  // lookups
  __nv_bfloat16* out;           // lookups x dim, row-major
  std::int64_t vocab;
  std::int64_t dim;             // a multiple of 8: rows are whole 16-byte vectors
  std::int64_t lookups;
  int sm_count;                 // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): one thread per element, straight from the table.
void gather_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream);

class GatherProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch07",
            .ladder = "gather",
            .summary = "embedding lookup of bf16 rows with Zipf-skewed repeats; bound: DRAM (distinct rows "
                       "read once + output written)",
            .axes = {{.name = "vocab", .default_value = 131072, .help = "table rows", .test_value = 1000},
                     {.name = "dim", .default_value = 4096,
                      .help = "bf16 values per row, a multiple of 8 (16-byte vectors)",
                      // 33 vectors per row: one more than a warp's lanes, so the row loops' tails run.
                      .test_value = 264},
                     {.name = "lookups", .default_value = 32768, .help = "indices looked up (tokens)",
                      .test_value = 777}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_vocab = axes.at("vocab");
    m_dim = axes.at("dim");
    m_lookups = axes.at("lookups");
    if (m_dim % 8 != 0) throw std::invalid_argument("ch07:gather: dim must be a multiple of 8");
    if (m_vocab > (std::int64_t{1} << 31) - 1) throw std::invalid_argument("ch07:gather: vocab must fit int32");
    m_table = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_vocab * m_dim));
    m_indices = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_lookups));
    m_out = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_lookups * m_dim));
    m_ref = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_lookups * m_dim));
    m_distinct = distinct_rows(m_lookups, m_vocab);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    m_host_indices = make_indices(m_lookups, m_vocab, seed);
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_indices.data(), m_host_indices.data(), m_indices.bytes(),
                                    cudaMemcpyHostToDevice, stream));
    gather_reference(args(), m_ref.data(), stream);
    // m_host_indices must outlive the copy.
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  std::vector<TensorView> inputs() const override {
    return {{"table", m_table.data(), m_table.size(), DType::bf16},
            {"indices", m_indices.data(), m_indices.size(), DType::i32}};
  }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_out.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_ref.size(), DType::bf16}};
  }

  // A gather copies bits: any difference is a bug.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double row_bytes = 2.0 * static_cast<double>(m_dim);
    const double read = static_cast<double>(m_distinct) * row_bytes + 4.0 * static_cast<double>(m_lookups);
    const double written = static_cast<double>(m_lookups) * row_bytes;
    return {.bytes = read + written, .flops = 0.0, .bytes_read = read, .bytes_written = written};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto table = to_host(inputs()[0], stream);
    const auto idx = to_host(inputs()[1], stream);
    const auto ref = to_host(references().front(), stream);
    return compare_on_host("out_ref", ref, gather_rows(table, idx, m_dim), tolerance());
  }

  Args args() const override {
    return {m_table.data(), m_indices.data(), m_out.data(), m_vocab, m_dim, m_lookups, m_sm_count,
            m_max_threads_per_sm};
  }

 private:
  std::int64_t m_vocab = 0, m_dim = 0, m_lookups = 0, m_distinct = 0;
  DeviceBuffer<__nv_bfloat16> m_table;
  DeviceBuffer<std::int32_t> m_indices;
  DeviceBuffer<__nv_bfloat16> m_out;
  DeviceBuffer<__nv_bfloat16> m_ref;
  std::vector<std::int32_t> m_host_indices;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of `threads`-thread blocks, as in ch07:copy: geometry is not what this ladder compares.
inline int full_wave_blocks(const Args& a, int threads) { return a.sm_count * (a.max_threads_per_sm / threads); }

}  // namespace aisp::ch07::gather
