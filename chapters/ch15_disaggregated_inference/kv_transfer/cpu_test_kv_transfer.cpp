// ch15:kv_transfer — the layout, the block tables, the byte count and the host transfer on cases small
// enough to check by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "chapters/ch15_disaggregated_inference/kv_transfer/reference.hpp"

namespace aisp::ch15::kv_transfer {
namespace {

// The ladder's default shape (Llama-3-8B attention, the engine's 16-token blocks).
constexpr Shape k_default{.sequences = 8, .tokens = 2048, .layers = 32, .kv_heads = 8, .head_dim = 128,
                          .block_size = 16};

TEST(Ch15KvTransferReference, ByteCountsAtTheDefaults) {
  EXPECT_EQ(k_default.blocks_per_seq(), 128);
  EXPECT_EQ(k_default.transfer_blocks(), 1024);
  EXPECT_EQ(k_default.pool_blocks(), 2048);
  // One (layer, K or V, block) chunk: 8 x 16 x 128 bf16 = 32 KiB; one block over 32 layers, K and V: 2 MiB.
  EXPECT_EQ(k_default.chunk_elems() * 2, 32 * 1024);
  EXPECT_EQ(k_default.bytes_per_block(), 2 * 1024 * 1024);
  EXPECT_EQ(k_default.chunks_moved(), 1024 * 32 * 2);
  EXPECT_EQ(k_default.bytes_moved(), std::int64_t{2} << 30);  // 2 GiB moved
  EXPECT_EQ(k_default.pool_elems() * 2, std::int64_t{4} << 30);  // each pool holds twice that
  // A partial last block moves whole: 40 tokens are 3 blocks of 16.
  constexpr Shape partial{.sequences = 3, .tokens = 40, .layers = 2, .kv_heads = 8, .head_dim = 128,
                          .block_size = 16};
  EXPECT_EQ(partial.blocks_per_seq(), 3);
  EXPECT_EQ(partial.bytes_moved(), 9 * partial.bytes_per_block());
}

TEST(Ch15KvTransferReference, LayoutIsTheServingEnginesPool) {
  // serving/gpu/llama_runner.cpp: kv is [layers][K, V][num_blocks][kv_heads][block_size][head_dim]; layer
  // l's k_pool starts at 2 l pool_elems, its v_pool pool_elems later, pool_elems = num_blocks x block_elems.
  const Shape s{.sequences = 2, .tokens = 5, .layers = 3, .kv_heads = 2, .head_dim = 4, .block_size = 2};
  const std::int64_t block_elems = std::int64_t{s.kv_heads} * s.block_size * s.head_dim;
  const std::int64_t pool_elems = s.pool_blocks() * block_elems;
  ASSERT_EQ(s.pool_blocks(), 12);
  for (int l = 0; l < s.layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (std::int64_t b = 0; b < s.pool_blocks(); ++b) {
        for (int h = 0; h < s.kv_heads; ++h) {
          for (int t = 0; t < s.block_size; ++t) {
            for (int d = 0; d < s.head_dim; ++d) {
              const std::int64_t engine =
                  2 * l * pool_elems + kv * pool_elems + b * block_elems + (h * s.block_size + t) * s.head_dim + d;
              ASSERT_EQ(s.element_offset(l, kv, b, h, t, d), engine) << l << " " << kv << " " << b;
            }
          }
        }
      }
    }
  }
  // A chunk is contiguous and the chunks tile the pool exactly: the last element of the last chunk is the
  // pool's last element.
  EXPECT_EQ(s.element_offset(0, 0, 0, s.kv_heads - 1, s.block_size - 1, s.head_dim - 1), s.chunk_elems() - 1);
  EXPECT_EQ(s.chunk_offset(s.layers - 1, 1, s.pool_blocks() - 1) + s.chunk_elems(), s.pool_elems());
}

TEST(Ch15KvTransferReference, BlockTablesAreSeededScatteredDistinctIds) {
  const Shape s = k_default;
  const BlockTables a = make_block_tables(s, 1);
  const BlockTables b = make_block_tables(s, 2);
  EXPECT_EQ(a.src, make_block_tables(s, 1).src);
  EXPECT_EQ(a.dst, make_block_tables(s, 1).dst);
  EXPECT_NE(a.src, b.src);
  EXPECT_NE(a.src, a.dst);  // the two allocators are independent
  for (const auto* t : {&a.src, &a.dst, &b.src, &b.dst}) {
    ASSERT_EQ(static_cast<std::int64_t>(t->size()), s.transfer_blocks());
    // Injective into the pool: no two listed blocks share a source (or a destination) block.
    const std::set<std::int32_t> distinct(t->begin(), t->end());
    EXPECT_EQ(static_cast<std::int64_t>(distinct.size()), s.transfer_blocks());
    EXPECT_GE(*distinct.begin(), 0);
    EXPECT_LT(*distinct.rbegin(), s.pool_blocks());
    // Scattered: not the identity prefix, and not sorted.
    EXPECT_FALSE(std::is_sorted(t->begin(), t->end()));
  }
  // The whole permutation, before the prefix is taken, is a bijection of the pool.
  auto full = scattered_blocks(64, 64, 7);
  std::sort(full.begin(), full.end());
  std::vector<std::int32_t> identity(64);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(full, identity);
}

TEST(Ch15KvTransferReference, TransferMovesListedChunksAndNothingElse) {
  // Every element of the source pool holds its own index; after the transfer, every element of a listed
  // destination block must hold the index of the same (layer, K/V, head, slot, d) in its source block,
  // and every other element must still hold the `unwritten` value.
  const Shape s{.sequences = 2, .tokens = 3, .layers = 3, .kv_heads = 2, .head_dim = 4, .block_size = 2};
  const BlockTables tables = make_block_tables(s, 5);
  std::vector<double> src(static_cast<std::size_t>(s.pool_elems()));
  std::iota(src.begin(), src.end(), 0.0);
  const auto dst = transfer_reference(s, src, tables.src, tables.dst, -1.0);
  ASSERT_EQ(dst.size(), src.size());
  std::vector<std::int64_t> source_of(static_cast<std::size_t>(s.pool_blocks()), -1);
  for (std::size_t i = 0; i < tables.dst.size(); ++i) {
    source_of[static_cast<std::size_t>(tables.dst[i])] = tables.src[i];
  }
  std::int64_t written = 0;
  for (int l = 0; l < s.layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (std::int64_t b = 0; b < s.pool_blocks(); ++b) {
        for (int h = 0; h < s.kv_heads; ++h) {
          for (int t = 0; t < s.block_size; ++t) {
            for (int d = 0; d < s.head_dim; ++d) {
              const double got = dst[static_cast<std::size_t>(s.element_offset(l, kv, b, h, t, d))];
              const std::int64_t from = source_of[static_cast<std::size_t>(b)];
              if (from < 0) {
                ASSERT_EQ(got, -1.0) << "unlisted block " << b << " written";
              } else {
                ASSERT_EQ(got, static_cast<double>(s.element_offset(l, kv, from, h, t, d)));
                ++written;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(written * 2, s.bytes_moved());  // bf16: the declared bytes are exactly the elements written
}

TEST(Ch15KvTransferReference, WordViewMatchesTheElementView) {
  // The gate compares the pools as 32-bit words (two bf16 each): the transfer computed on words must be
  // the transfer computed on elements, paired.
  const Shape s{.sequences = 3, .tokens = 5, .layers = 2, .kv_heads = 2, .head_dim = 4, .block_size = 4};
  const BlockTables tables = make_block_tables(s, 9);
  std::vector<double> elems(static_cast<std::size_t>(s.pool_elems()));
  std::iota(elems.begin(), elems.end(), 0.0);
  std::vector<double> words(elems.size() / 2);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = elems[2 * i] * 1e6 + elems[2 * i + 1];
  const auto by_elem = transfer_reference(s, elems, tables.src, tables.dst, -1.0);
  const auto by_word = transfer_reference(s, words, tables.src, tables.dst, -1.0, 2);
  ASSERT_EQ(by_word.size(), by_elem.size() / 2);
  for (std::size_t i = 0; i < by_word.size(); ++i) {
    const double want = by_elem[2 * i] < 0 ? -1.0 : by_elem[2 * i] * 1e6 + by_elem[2 * i + 1];
    ASSERT_EQ(by_word[i], want) << i;
  }
}

}  // namespace
}  // namespace aisp::ch15::kv_transfer
