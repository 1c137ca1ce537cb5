// The step metadata builder (serving/gpu/step_metadata.hpp): host-only, runs with or without a GPU.
#include <gtest/gtest.h>

#include "core/base/error.hpp"
#include "serving/gpu/step_metadata.hpp"

namespace aisp::serving::gpu {
namespace {

const StepLimits k_limits{.block_size = 4, .num_blocks = 10, .max_tokens = 200, .max_context = 64, .vocab = 100};

ScheduledSequence seq(std::vector<TokenId> tokens, int start, std::vector<std::int32_t> blocks, bool sample) {
  ScheduledSequence s;
  s.tokens = std::move(tokens);
  s.start_position = start;
  s.blocks = std::move(blocks);
  s.sample = sample;
  return s;
}

TEST(StepMetadata, LaysOutARaggedBatch) {
  // A decode at position 5 (blocks 7, 2) and a 6-token prefill chunk at positions 2..7 (blocks 9, 0).
  StepBatch b{{seq({11}, 5, {7, 2}, true), seq({1, 2, 3, 4, 5, 6}, 2, {9, 0}, false)}, 4};
  const StepMetadata md = build_step_metadata(b, k_limits, false);
  ASSERT_EQ(md.num_tokens, 7);
  ASSERT_EQ(md.num_seqs, 2);
  EXPECT_EQ(md.table_stride, 2);
  const auto at = [&](int base, int i) { return md.data[static_cast<std::size_t>(base + i)]; };
  EXPECT_EQ(at(md.tokens, 0), 11);
  EXPECT_EQ(at(md.positions, 0), 5);
  EXPECT_EQ(at(md.slots, 0), 2 * 4 + 1);  // position 5: block index 1 -> physical 2, offset 1
  EXPECT_EQ(at(md.positions, 1), 2);
  EXPECT_EQ(at(md.slots, 1), 9 * 4 + 2);
  EXPECT_EQ(at(md.slots, 6), 0 * 4 + 3);  // position 7: block index 1 -> physical 0, offset 3
  EXPECT_EQ(at(md.token_seq, 6), 1);
  EXPECT_EQ(at(md.query_start, 0), 0);
  EXPECT_EQ(at(md.query_start, 1), 1);
  EXPECT_EQ(at(md.query_start, 2), 7);
  EXPECT_EQ(at(md.context_len, 0), 6);
  EXPECT_EQ(at(md.context_len, 1), 8);
  EXPECT_EQ(at(md.block_table, 2), 9);
  ASSERT_EQ(md.num_decode, 1);
  EXPECT_EQ(at(md.decode_seqs, 0), 0);
  EXPECT_EQ(md.max_decode_context, 6);
  ASSERT_EQ(md.num_prefill_tiles, 1);
  EXPECT_EQ(at(md.prefill_tiles, 0), 1);
  EXPECT_EQ(at(md.prefill_tiles, 1), 0);
  ASSERT_EQ(md.num_logit_rows, 1);  // only the decode samples
  EXPECT_EQ(at(md.logit_rows, 0), 0);

  const StepMetadata all = build_step_metadata(b, k_limits, true);
  EXPECT_EQ(all.num_logit_rows, 7);
}

TEST(StepMetadata, TilesLongestFirst) {
  std::vector<TokenId> many(40, 1);
  StepLimits limits = k_limits;
  limits.block_size = 16;
  // 40 tokens from position 0 and 40 from position 100 (one tile each, k_prefill_tile_rows = 64).
  StepBatch b{{seq(many, 0, {0, 1, 2}, true), seq(many, 100, {3, 4, 5, 6, 7, 8, 9, 0, 1}, true)}, 16};
  limits.max_context = 200;
  const StepMetadata md = build_step_metadata(b, limits, false);
  ASSERT_EQ(md.num_prefill_tiles, 2);
  EXPECT_EQ(md.data[static_cast<std::size_t>(md.prefill_tiles)], 1);  // the one ending at position 139
  EXPECT_EQ(md.num_logit_rows, 2);
  EXPECT_EQ(md.data[static_cast<std::size_t>(md.logit_rows + 1)], 79);
}

TEST(StepMetadata, RefusesBrokenBatches) {
  const auto refused = [](StepBatch b) {
    EXPECT_THROW((void)build_step_metadata(b, k_limits, false), UsageError);
  };
  refused({{seq({1}, 4, {1}, true)}, 4});           // position 4 needs a second block
  refused({{seq({1}, 0, {10}, true)}, 4});          // block outside the pool
  refused({{seq({100}, 0, {1}, true)}, 4});         // token outside the vocabulary
  refused({{seq({}, 0, {1}, true)}, 4});            // no tokens
  refused({{seq({1}, 0, {1}, true)}, 8});           // another block size
  refused({{seq({1}, 64, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, true)}, 4});  // past max_context
  refused({{seq(std::vector<TokenId>(201, 1), 0, {}, true)}, 4});      // more than max_tokens (blocks too)
  EXPECT_NO_THROW((void)build_step_metadata({{}, 4}, k_limits, false));
}

}  // namespace
}  // namespace aisp::serving::gpu
