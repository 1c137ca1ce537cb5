// ch15:kv_transfer — the contract of the KV-cache transfer ladder: prefill/decode disaggregation moves a
// sequence's paged KV cache from the GPU that prefilled it (the next GPU, the *peer*) to the GPU that
// will decode it (this one).
//
// Both GPUs hold a pool in the serving engine's layout (reference.hpp, serving/gpu/llama_runner.cpp):
//   pool [layers][K, V][pool_blocks][kv_heads][block_size][head_dim] bf16.
// A transfer moves `sequences` sequences of `tokens` tokens, ceil(tokens / 16) blocks each. Block i of
// the transfer is read from source block src_table[i] and written to destination block dst_table[i],
// both scattered (reference.hpp); every layer's K and V of every listed block moves. Llama-3-8B's shape
// (32 layers, 8 KV heads, head_dim 128, blocks of 16 tokens): one (layer, K or V, block) chunk is
// 8 x 16 x 128 x 2 B = 32 KiB, contiguous; one block across all layers 2 x 32 x 32 KiB = 2 MiB, in 64
// pieces a pool apart. The defaults (8 sequences x 2048 tokens = 1024 blocks) move 2 GiB.
//
// Bound: the link. Every moved byte crosses from the peer once, placed against the pair's measured
// GPU<->GPU ceiling (aisp hw peaks, "p2p_<peer>_to_<this>_peer") like ch02:p2p_copy: ~5.5 ms for 2 GiB
// at ~390 GB/s (H200 pair, NVLink 4). Needs two GPUs: every variant declares the multi_gpu feature and is
// SKIPPED on one.
//
// The gate: the destination pool is the output, compared with a reference pool bit for bit. Both are
// viewed as 32-bit words (pairs of bf16), not as bf16: the harness poisons every output byte to 0xFF
// before every launch it checks, which is NaN in bf16 (never equal to anything) but -1 as an integer, a
// value the reference can hold. The reference holds -1 in every block the transfer does not list, so
// an unlisted destination block must still hold the poison after the launch: a variant that writes one
// (a wrong table, a whole-pool copy) fails. No moved word can be -1: the source holds uniform bf16
// values in [-1, 1), and 0xFFFF is a NaN.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/ch15_disaggregated_inference/kv_transfer/reference.hpp"
#include "core/base/error.hpp"
#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"
#include "device/peer_access.hpp"

namespace aisp::ch15::kv_transfer {

// The fixed part of the shape: Llama-3-8B's attention (8 KV heads of 128) in the engine's 16-token blocks.
constexpr int k_kv_heads = 8;
constexpr int k_head_dim = 128;
constexpr int k_block_size = 16;

struct Args {
  Shape shape;
  const __nv_bfloat16* src_pool;        // on GPU `peer`
  __nv_bfloat16* dst_pool;              // on GPU `device` (the harness's)
  const std::int32_t* src_table;        // [transfer_blocks], on `device`
  const std::int32_t* dst_table;        // [transfer_blocks], on `device`
  const std::int32_t* src_table_peer;   // the same as src_table, on `peer`: for kernels that run there
  const std::int32_t* src_table_host;   // the same tables in host memory, for steps that loop on the host
  const std::int32_t* dst_table_host;
  int device;
  int peer;
  int sm_count;                         // of `device`: launch geometry from the device, never a literal
  int max_threads_per_sm;
};

// The trusted reference (device_reference.cu): every byte of `ref` to 0xFF, then one thread per bf16
// element of the listed chunks copies it from the source pool, read over the peer mapping. Slow and
// obviously right; check_reference_on_host checks it against reference.hpp at the test size.
void launch_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream);

class KvTransferProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch15",
            .ladder = "kv_transfer",
            .summary = "move sequences' paged bf16 KV blocks (every layer's K and V) from the next GPU into "
                       "this one's pool; bound: the measured GPU<->GPU bandwidth",
            .axes = {{.name = "sequences", .default_value = 8, .help = "sequences moved in one transfer",
                      .test_value = 3},
                     {.name = "tokens", .default_value = 2048,
                      .help = "tokens per sequence (blocks of 16; a partial last block moves whole)",
                      // 2.5 blocks: the last block of each sequence is partial.
                      .test_value = 40},
                     {.name = "layers", .default_value = 32, .help = "transformer layers, each with a K and a V pool",
                      .test_value = 2}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_shape = {.sequences = static_cast<int>(axes.at("sequences")),
               .tokens = static_cast<int>(axes.at("tokens")),
               .layers = static_cast<int>(axes.at("layers")),
               .kv_heads = k_kv_heads,
               .head_dim = k_head_dim,
               .block_size = k_block_size};
    if (m_shape.pool_blocks() > 0x7fffffff) {
      throw UsageError("ch15:kv_transfer: sequences * blocks per sequence * 2 must fit the int32 block tables");
    }
    const auto elems = static_cast<std::size_t>(m_shape.pool_elems());
    const auto listed = static_cast<std::size_t>(m_shape.transfer_blocks());
    m_device = device.index;
    // With one GPU the variants are SKIPPED; the buffers still exist so that the harness's pass runs.
    m_peer = device.device_count >= 2 ? (device.index + 1) % device.device_count : device.index;
    if (m_peer != m_device) {
      // The gate (fill, hash) and the reference run on this GPU and read the source pool where it lives.
      if (!enable_peer_access(m_peer)) {
        throw std::runtime_error("GPU " + std::to_string(m_device) + " cannot access GPU " +
                                 std::to_string(m_peer) + "'s memory (no peer path): this ladder needs one");
      }
      AISP_CUDA_CHECK(cudaSetDevice(m_peer));
      m_src = DeviceBuffer<__nv_bfloat16>(elems);
      m_src_table_peer = DeviceBuffer<std::int32_t>(listed);
      AISP_CUDA_CHECK(cudaSetDevice(m_device));
    } else {
      m_src = DeviceBuffer<__nv_bfloat16>(elems);
      m_src_table_peer = DeviceBuffer<std::int32_t>(listed);
    }
    m_dst = DeviceBuffer<__nv_bfloat16>(elems);
    m_ref = DeviceBuffer<__nv_bfloat16>(elems);
    m_src_table = DeviceBuffer<std::int32_t>(listed);
    m_dst_table = DeviceBuffer<std::int32_t>(listed);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    m_tables = make_block_tables(m_shape, seed);
    const std::size_t table_bytes = m_src_table.bytes();
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_src_table.data(), m_tables.src.data(), table_bytes, cudaMemcpyDefault, stream));
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_dst_table.data(), m_tables.dst.data(), table_bytes, cudaMemcpyDefault, stream));
    AISP_CUDA_CHECK(
        cudaMemcpyAsync(m_src_table_peer.data(), m_tables.src.data(), table_bytes, cudaMemcpyDefault, stream));
    launch_reference(args(), m_ref.data(), stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host tables are read by the copies above
  }

  // The source pool as bf16 (so that fill_uniform draws bf16 values); the tables, the peer's copy
  // included, so that the input hash catches a variant that writes any of them.
  std::vector<TensorView> inputs() const override {
    return {{"src_pool", m_src.data(), m_src.size(), DType::bf16},
            {"src_table", m_src_table.data(), m_src_table.size(), DType::i32},
            {"dst_table", m_dst_table.data(), m_dst_table.size(), DType::i32},
            {"src_table_peer", m_src_table_peer.data(), m_src_table_peer.size(), DType::i32}};
  }
  // As 32-bit words: see the header comment (the poison is -1, a value the reference holds).
  std::vector<TensorView> outputs() const override {
    return {{"dst_pool", m_dst.data(), m_dst.size() / 2, DType::i32}};
  }
  std::vector<TensorView> references() const override {
    return {{"dst_pool_ref", m_ref.data(), m_ref.size() / 2, DType::i32}};
  }
  // A copy is exact.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // The moved chunks cross the link once (read on the peer, written here): placed against the pair's
  // measured peer-access ceiling, not DRAM. The tables (8 bytes a block) are left out.
  Work work() const override {
    return {.bytes = static_cast<double>(m_shape.bytes_moved()),
            .ceiling = m_peer != m_device ? p2p_ceiling_name(m_peer, m_device, true) : "p2p"};
  }

  Args args() const override {
    return {m_shape,
            m_src.data(),
            m_dst.data(),
            m_src_table.data(),
            m_dst_table.data(),
            m_src_table_peer.data(),
            m_tables.src.data(),
            m_tables.dst.data(),
            m_device,
            m_peer,
            m_sm_count,
            m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto ins = inputs();
    const auto words = to_host({"src_pool", m_src.data(), m_src.size() / 2, DType::i32}, stream);
    const auto table = [&](const TensorView& t) {
      const auto values = to_host(t, stream);
      return std::vector<std::int32_t>(values.begin(), values.end());
    };
    const auto src_table = table(ins[1]);
    const auto want = transfer_reference(m_shape, words, src_table, table(ins[2]), -1.0, 2);
    if (table(ins[3]) != src_table) return "src_table_peer differs from src_table";
    return compare_on_host("dst_pool_ref", to_host(references()[0], stream), want, tolerance());
  }

 private:
  Shape m_shape;
  int m_device = 0, m_peer = 0;
  DeviceBuffer<__nv_bfloat16> m_src, m_dst, m_ref;
  DeviceBuffer<std::int32_t> m_src_table, m_dst_table, m_src_table_peer;
  BlockTables m_tables;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of `threads`-thread blocks, as in ch07:copy.
inline int full_wave_blocks(int sm_count, int max_threads_per_sm, int threads) {
  return sm_count * (max_threads_per_sm / threads);
}

// 16-byte vectors per chunk: a chunk is kv_heads x block_size x head_dim bf16, a multiple of 8 elements
// (head_dim 128), so the vectorized steps never see a partial vector.
constexpr int k_elems_per_vec = 8;
static_assert(k_kv_heads * k_block_size * k_head_dim % k_elems_per_vec == 0);

}  // namespace aisp::ch15::kv_transfer
