// BlockManager: allocation, reference counts, per-sequence tables, reservations, exhaustion, and
// the invariant check under a long random sequence of operations checked against a plain model.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "core/base/error.hpp"
#include "serving/block_manager.hpp"

using aisp::serving::BlockId;
using aisp::serving::BlockManager;

TEST(BlockManager, RejectsNonPositiveSizes) {
  EXPECT_THROW(BlockManager(0, 16), aisp::UsageError);
  EXPECT_THROW(BlockManager(4, 0), aisp::UsageError);
}

TEST(BlockManager, AllocatesEveryBlockOnceThenRunsOut) {
  BlockManager bm(4, 16);
  std::set<BlockId> got;
  for (int i = 0; i < 4; ++i) {
    auto b = bm.allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(bm.ref_count(*b), 1);
    got.insert(*b);
  }
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(bm.num_free(), 0);
  EXPECT_FALSE(bm.allocate().has_value());
  EXPECT_EQ(bm.check_invariants(), "");
  bm.release(*got.begin());
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_EQ(bm.allocate(),
            std::optional<BlockId>(*got.begin()));  // LIFO: the freed block comes back
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(BlockManager, ShareAndReleaseCountReferences) {
  BlockManager bm(2, 16);
  const BlockId b = *bm.allocate();
  bm.share(b);
  EXPECT_EQ(bm.ref_count(b), 2);
  bm.release(b);
  EXPECT_EQ(bm.ref_count(b), 1);
  EXPECT_EQ(bm.num_free(), 1);  // still referenced: not free
  bm.release(b);
  EXPECT_EQ(bm.ref_count(b), 0);
  EXPECT_EQ(bm.num_free(), 2);
  EXPECT_THROW(bm.release(b), std::logic_error);  // double free
  EXPECT_THROW(bm.share(b), std::logic_error);    // sharing a free block
  EXPECT_THROW(bm.share(7), std::logic_error);    // outside the pool
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(BlockManager, TablesGrowByBlockAndFreeEverything) {
  BlockManager bm(8, 16);
  EXPECT_EQ(bm.blocks_for_tokens(0), 0);
  EXPECT_EQ(bm.blocks_for_tokens(1), 1);
  EXPECT_EQ(bm.blocks_for_tokens(16), 1);
  EXPECT_EQ(bm.blocks_for_tokens(17), 2);
  ASSERT_TRUE(bm.grow_to(1, 17));
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  ASSERT_TRUE(bm.grow_to(1, 32));
  EXPECT_EQ(bm.block_table(1).size(), 2u);  // 32 positions still fit two blocks
  ASSERT_TRUE(bm.grow_to(1, 33));
  EXPECT_EQ(bm.block_table(1).size(), 3u);
  ASSERT_TRUE(bm.grow_to(2, 16 * 5));
  EXPECT_EQ(bm.num_free(), 0);
  // The two tables never share a block.
  std::set<BlockId> all(bm.block_table(1).begin(), bm.block_table(1).end());
  all.insert(bm.block_table(2).begin(), bm.block_table(2).end());
  EXPECT_EQ(all.size(), 8u);
  bm.free_sequence(1);
  EXPECT_FALSE(bm.has_sequence(1));
  EXPECT_TRUE(bm.block_table(1).empty());
  EXPECT_EQ(bm.num_free(), 3);
  bm.free_sequence(1);  // twice is harmless
  bm.free_sequence(2);
  EXPECT_EQ(bm.num_free(), 8);
  EXPECT_EQ(bm.num_sequences(), 0);
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(BlockManager, GrowIsAllOrNothingWhenExhausted) {
  BlockManager bm(4, 4);
  ASSERT_TRUE(bm.grow_to(1, 8));  // 2 blocks
  ASSERT_TRUE(bm.grow_to(2, 4));  // 1 block
  EXPECT_TRUE(bm.can_allocate(1));
  EXPECT_FALSE(bm.can_allocate(2));
  EXPECT_FALSE(bm.grow_to(1, 16));  // needs 2 more, 1 free
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_FALSE(bm.grow_to(3, 8));  // a first grow that fails leaves no empty table behind
  EXPECT_FALSE(bm.has_sequence(3));
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(BlockManager, ReserveTakesTheWholeContextAndCapsIt) {
  BlockManager bm(6, 16);
  ASSERT_TRUE(bm.reserve(1, 40));  // 3 blocks for 40 positions, all at once
  EXPECT_EQ(bm.block_table(1).size(), 3u);
  EXPECT_TRUE(bm.grow_to(1, 40));  // within the reservation: nothing to do
  EXPECT_EQ(bm.num_free(), 3);
  EXPECT_THROW((void)bm.grow_to(1, 41), std::logic_error);
  EXPECT_FALSE(bm.reserve(2, 64));  // 4 blocks, 3 free: nothing taken
  EXPECT_EQ(bm.num_free(), 3);
  EXPECT_FALSE(bm.has_sequence(2));
  EXPECT_THROW((void)bm.reserve(1, 8), std::logic_error);
  EXPECT_EQ(bm.check_invariants(), "");
  bm.free_sequence(1);
  EXPECT_EQ(bm.num_free(), 6);
}

// Random allocate / share / release / grow / free against a model of the expected counts: every
// step the invariants hold and each count equals the model's.
TEST(BlockManager, RandomOperationsKeepInvariants) {
  std::mt19937 rng(1234);
  BlockManager bm(32, 4);
  std::map<BlockId, int> loose;  // blocks held outside tables, and their counts
  std::map<aisp::serving::SequenceId, int> seq_tokens;
  for (int iter = 0; iter < 20000; ++iter) {
    const int op = static_cast<int>(rng() % 5);
    if (op == 0) {
      if (auto b = bm.allocate()) loose[*b] += 1;
    } else if (op == 1 && !loose.empty()) {
      auto it = std::next(loose.begin(), static_cast<long>(rng() % loose.size()));
      bm.share(it->first);
      it->second += 1;
    } else if (op == 2 && !loose.empty()) {
      auto it = std::next(loose.begin(), static_cast<long>(rng() % loose.size()));
      bm.release(it->first);
      if (--it->second == 0) loose.erase(it);
    } else if (op == 3) {
      const auto seq = static_cast<aisp::serving::SequenceId>(rng() % 6);
      const int tokens = seq_tokens[seq] + static_cast<int>(rng() % 9);
      const int before = bm.num_free();
      const int need = bm.blocks_for_tokens(tokens) - static_cast<int>(bm.block_table(seq).size());
      if (bm.grow_to(seq, tokens)) {
        seq_tokens[seq] = tokens;
        EXPECT_EQ(bm.num_free(), before - std::max(need, 0));
      } else {
        EXPECT_GT(need, before);
        EXPECT_EQ(bm.num_free(), before);
      }
    } else if (op == 4) {
      const auto seq = static_cast<aisp::serving::SequenceId>(rng() % 6);
      bm.free_sequence(seq);
      seq_tokens.erase(seq);
    }
    ASSERT_EQ(bm.check_invariants(), "") << "after operation " << iter;
  }
  int used = 0;
  for (BlockId b = 0; b < bm.num_blocks(); ++b) {
    int expected = loose.count(b) ? loose[b] : 0;
    for (const auto& [seq, tokens] : seq_tokens) {
      const auto& t = bm.block_table(seq);
      expected += static_cast<int>(std::count(t.begin(), t.end(), b));
    }
    EXPECT_EQ(bm.ref_count(b), expected) << "block " << b;
    used += expected > 0;
  }
  EXPECT_EQ(bm.num_used(), used);
}
