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

// Speculative verification: a sample_all sequence gets a logit row after every one of its tokens, in
// batch order with the other sequences' rows, and a one-token sample_all is a plain decode.
TEST(StepMetadata, SampleAllTakesEveryRow) {
  ScheduledSequence verify = seq({4, 5, 6}, 5, {7, 2}, false);
  verify.sample_all = true;
  ScheduledSequence single = seq({9}, 3, {1}, false);
  single.sample_all = true;
  StepBatch b{{seq({11}, 5, {3, 8}, true), verify, seq({1, 2}, 0, {0}, false), single}, 4};
  const StepMetadata md = build_step_metadata(b, k_limits, false);
  ASSERT_EQ(md.num_logit_rows, 5);
  const std::vector<std::int32_t> rows(md.data.begin() + md.logit_rows, md.data.begin() + md.logit_rows + 5);
  EXPECT_EQ(rows, (std::vector<std::int32_t>{0, 1, 2, 3, 6}));  // token 4, 5 (the unsampled chunk) skipped
  EXPECT_EQ(md.num_decode, 2);          // the two one-token sequences
  EXPECT_EQ(md.num_prefill_tiles, 2);   // the verification's 3 rows and the chunk
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

// The CUDA-graph shape (StepPadding): padding sequences after the batch's, a fixed table width, and the
// same offsets for every batch of that shape (a captured graph reads its arrays at baked-in addresses).
TEST(StepMetadata, PadsADecodeBatchToItsGraphShape) {
  const StepPadding pad{.seqs = 4, .table_stride = 8, .pad_block = 10};  // block 10: past the pool of 10
  const StepBatch two{{seq({11}, 5, {7, 2}, true), seq({12}, 0, {3}, true)}, 4};
  const StepBatch three{{seq({13}, 30, {0, 1, 2, 3, 4, 5, 6, 8}, true), seq({14}, 1, {9}, true),
                         seq({15}, 2, {5}, true)}, 4};
  const StepMetadata a = build_step_metadata(two, k_limits, false, pad);
  const StepMetadata b = build_step_metadata(three, k_limits, false, pad);
  for (const StepMetadata* md : {&a, &b}) {
    EXPECT_EQ(md->num_seqs, 4);
    EXPECT_EQ(md->num_tokens, 4);
    EXPECT_EQ(md->num_decode, 4);
    EXPECT_EQ(md->num_logit_rows, 4);
    EXPECT_EQ(md->table_stride, 8);
  }
  EXPECT_EQ(a.data.size(), b.data.size());
  for (const auto field : {&StepMetadata::tokens, &StepMetadata::positions, &StepMetadata::slots,
                           &StepMetadata::query_start, &StepMetadata::context_len, &StepMetadata::block_table,
                           &StepMetadata::decode_seqs, &StepMetadata::logit_rows}) {
    EXPECT_EQ(a.*field, b.*field);
  }
  const auto at = [&](int base, int i) { return a.data[static_cast<std::size_t>(base + i)]; };
  EXPECT_EQ(at(a.slots, 0), 2 * 4 + 1);  // the real sequences as without padding
  EXPECT_EQ(at(a.block_table, 8), 3);    // row 1 of a table 8 wide
  for (int p = 2; p < 4; ++p) {           // the padding: token 0 at position 0 of the pad block
    EXPECT_EQ(at(a.tokens, p), 0);
    EXPECT_EQ(at(a.positions, p), 0);
    EXPECT_EQ(at(a.slots, p), 10 * 4);
    EXPECT_EQ(at(a.context_len, p), 1);
    EXPECT_EQ(at(a.block_table, 8 * p), 10);
  }
  // A batch that does not fit its shape, and a real sequence naming the pad block, are refused.
  EXPECT_THROW((void)build_step_metadata(three, k_limits, false, {.seqs = 2, .table_stride = 8, .pad_block = 10}),
               UsageError);
  EXPECT_THROW((void)build_step_metadata(three, k_limits, false, {.seqs = 4, .table_stride = 4, .pad_block = 10}),
               UsageError);
  const StepBatch sneaky{{seq({11}, 0, {10}, true)}, 4};
  EXPECT_THROW((void)build_step_metadata(sneaky, k_limits, false, pad), UsageError);
}

// max_step_metadata_ints bounds what build_step_metadata lays out, for every mix a step can hold: all
// decodes (the graph shape, padded), prefill chunks long enough for several tiles, every row sampled.
TEST(StepMetadata, TheBoundHoldsEveryLayout) {
  const auto fits = [](const StepMetadata& md, int tokens, int seqs, int stride) {
    EXPECT_LE(md.data.size(), max_step_metadata_ints(tokens, seqs, stride))
        << md.num_tokens << " tokens in " << md.num_seqs << " sequences, table " << md.table_stride;
  };
  const StepBatch decodes{{seq({11}, 5, {7, 2}, true), seq({12}, 0, {3}, true)}, 4};
  fits(build_step_metadata(decodes, k_limits, false, {.seqs = 4, .table_stride = 16, .pad_block = 10}), 4, 4, 16);
  // 130 tokens in one chunk: 3 tiles of 64 queries, every row sampled (a verification-like step).
  const StepLimits roomy{.block_size = 4, .num_blocks = 40, .max_tokens = 400, .max_context = 160, .vocab = 100};
  std::vector<std::int32_t> blocks(33);
  for (int b = 0; b < 33; ++b) blocks[static_cast<std::size_t>(b)] = b;
  StepBatch long_chunk{{seq(std::vector<TokenId>(130, 1), 0, blocks, true)}, 4};
  long_chunk.sequences[0].sample_all = true;
  const StepMetadata tiled = build_step_metadata(long_chunk, roomy, true);
  EXPECT_EQ(tiled.num_prefill_tiles, 3);
  fits(tiled, 130, 1, 33);
  StepBatch mixed{{seq({11}, 5, {7, 2}, true), seq(std::vector<TokenId>(20, 2), 0, {0, 1, 3, 4, 5}, true),
                   seq({13}, 8, {6, 8, 9}, true)},
                  4};
  fits(build_step_metadata(mixed, k_limits, true), 22, 3, 5);
  // The graph shape's exact size, as the runner sized its buffer before: 8 + the width per sequence, + 1.
  EXPECT_EQ(build_step_metadata(decodes, k_limits, false, {.seqs = 4, .table_stride = 16, .pad_block = 10}).data.size(),
            4u * (8 + 16) + 1);
}

}  // namespace
}  // namespace aisp::serving::gpu
