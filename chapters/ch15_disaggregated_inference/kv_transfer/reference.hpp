// ch15:kv_transfer — host side of the ladder: the paged KV layout of the serving engine, the block tables
// of one transfer, the bytes it moves, and the transfer itself in plain C++ (the CPU reference at test
// sizes). No CUDA headers: the CPU tests include this file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace aisp::ch15::kv_transfer {

// One transfer's shape. The pool layout is the serving engine's (serving/gpu/llama_runner.cpp, `kv`):
//
//   pool [layers][K, V][pool_blocks][kv_heads][block_size][head_dim] bf16
//
// so one (layer, K or V, block) — a *chunk* here — is a contiguous kv_heads x block_size x head_dim run
// (32 KiB at 8 x 16 x 128), and the chunks of one block are 2 x layers runs a whole (layer, K or V) pool
// apart: a block is not contiguous across layers. The member functions are constexpr so that kernels
// can call them too (nvcc's --expt-relaxed-constexpr, set for every ladder).
struct Shape {
  int sequences = 0;
  int tokens = 0;      // per sequence: its last block may be partial, and moves whole like the others
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;  // tokens per block

  constexpr int blocks_per_seq() const { return (tokens + block_size - 1) / block_size; }
  // The blocks this transfer moves, [sequence][block of the sequence].
  constexpr std::int64_t transfer_blocks() const { return std::int64_t{sequences} * blocks_per_seq(); }
  // Both pools hold twice the blocks moved: the other half belongs to sequences not moved now, so the
  // block ids are scattered over a pool larger than the transfer, and the destination has blocks the
  // transfer must not touch (the gate checks that they still hold the poison).
  constexpr std::int64_t pool_blocks() const { return 2 * transfer_blocks(); }
  constexpr std::int64_t chunk_elems() const {
    return std::int64_t{kv_heads} * block_size * head_dim;
  }
  // Element offset of chunk (layer, kv = 0 for K or 1 for V, block) in a pool: the engine's k_pool for
  // layer l is kv + 2 l pool_elems, its v_pool k_pool + pool_elems (pool_elems = blocks x block_elems).
  constexpr std::int64_t chunk_offset(int layer, int kv, std::int64_t block) const {
    return ((std::int64_t{layer} * 2 + kv) * pool_blocks() + block) * chunk_elems();
  }
  // Element (head, slot, d) of that chunk: the full engine index.
  constexpr std::int64_t element_offset(int layer, int kv, std::int64_t block, int head, int slot, int d) const {
    return chunk_offset(layer, kv, block) + (std::int64_t{head} * block_size + slot) * head_dim + d;
  }
  constexpr std::int64_t pool_elems() const { return 2 * std::int64_t{layers} * pool_blocks() * chunk_elems(); }
  // The contiguous runs one transfer copies: K and V of every layer of every listed block.
  constexpr std::int64_t chunks_moved() const { return transfer_blocks() * 2 * layers; }
  // Bytes read on the source GPU and written on this one, each once (bf16: 2 bytes an element).
  constexpr std::int64_t bytes_moved() const { return chunks_moved() * chunk_elems() * 2; }
  constexpr std::int64_t bytes_per_block() const { return 2 * std::int64_t{layers} * chunk_elems() * 2; }
};

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The first `count` entries of a seeded random permutation of [0, pool_blocks) (Fisher-Yates): distinct
// block ids scattered over the pool, as a block allocator's free list hands them out after a while of
// serving. (ch16:paged_attention's page table is the same idea over a whole pool.)
inline std::vector<std::int32_t> scattered_blocks(std::int64_t pool_blocks, std::int64_t count,
                                                  std::uint64_t seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(pool_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::uint64_t state = splitmix64(seed);
  for (std::size_t i = ids.size(); i > 1; --i) {
    state = splitmix64(state);
    std::swap(ids[i - 1], ids[state % i]);
  }
  ids.resize(static_cast<std::size_t>(count));
  return ids;
}

// The two block tables of one transfer, each [sequence][block of the sequence] flattened: block i of the
// transfer is read from source block src[i] (where the prefill GPU's allocator put it) and written to
// destination block dst[i] (what the decode GPU's allocator gave it). Independent permutations: the two
// engines' allocators know nothing of each other.
struct BlockTables {
  std::vector<std::int32_t> src;
  std::vector<std::int32_t> dst;
};

inline BlockTables make_block_tables(const Shape& s, std::uint64_t seed) {
  return {scattered_blocks(s.pool_blocks(), s.transfer_blocks(), seed ^ 0x5EC0DEull),
          scattered_blocks(s.pool_blocks(), s.transfer_blocks(), seed ^ 0xDEC0DEull)};
}

// The destination pool after the transfer, starting from a pool whose every value is `unwritten`: for
// every listed block i, every layer's K and V chunk of source block src[i] lands in destination block
// dst[i]; every other value stays `unwritten`. T is any element type: `per_value` bf16 elements make one
// T (2 when the pools are viewed as 32-bit words, as the gate compares them).
template <class T>
std::vector<T> transfer_reference(const Shape& s, const std::vector<T>& src_pool,
                                  const std::vector<std::int32_t>& src_table,
                                  const std::vector<std::int32_t>& dst_table, T unwritten, int per_value = 1) {
  std::vector<T> dst(static_cast<std::size_t>(s.pool_elems() / per_value), unwritten);
  const std::int64_t run = s.chunk_elems() / per_value;
  for (std::int64_t i = 0; i < s.transfer_blocks(); ++i) {
    for (int layer = 0; layer < s.layers; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        const std::int64_t from = s.chunk_offset(layer, kv, src_table[static_cast<std::size_t>(i)]) / per_value;
        const std::int64_t to = s.chunk_offset(layer, kv, dst_table[static_cast<std::size_t>(i)]) / per_value;
        std::copy(src_pool.begin() + from, src_pool.begin() + from + run, dst.begin() + to);
      }
    }
  }
  return dst;
}

}  // namespace aisp::ch15::kv_transfer
