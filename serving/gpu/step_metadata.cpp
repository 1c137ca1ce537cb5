// Validation and layout of a step's metadata (step_metadata.hpp).
#include "serving/gpu/step_metadata.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/base/error.hpp"

namespace aisp::serving::gpu {
namespace {

[[noreturn]] void refuse(std::size_t index, const ScheduledSequence& s, const std::string& why) {
  throw UsageError("LlamaRunner::step: sequence " + std::to_string(index) + " (id " + std::to_string(s.id) +
                   "): " + why);
}

// Checks every sequence against the contract; returns the block-table width the batch needs.
int validate(const StepBatch& batch, const StepLimits& limits) {
  if (batch.block_size != limits.block_size) {
    throw UsageError("LlamaRunner::step: the batch's block_size " + std::to_string(batch.block_size) +
                     " is not the runner's " + std::to_string(limits.block_size));
  }
  int table_stride = 0;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
    const ScheduledSequence& s = batch.sequences[i];
    const auto n = static_cast<std::int64_t>(s.tokens.size());
    if (n == 0) refuse(i, s, "no tokens");
    if (s.start_position < 0) refuse(i, s, "negative start_position " + std::to_string(s.start_position));
    const std::int64_t context = s.start_position + n;
    if (context > limits.max_context) {
      refuse(i, s, "context " + std::to_string(context) + " exceeds max_context " + std::to_string(limits.max_context));
    }
    const std::int64_t need = (context + limits.block_size - 1) / limits.block_size;
    if (static_cast<std::int64_t>(s.blocks.size()) < need) {
      refuse(i, s, std::to_string(s.blocks.size()) + " blocks cannot hold " + std::to_string(context) + " positions");
    }
    for (std::int64_t b = 0; b < need; ++b) {
      const std::int32_t id = s.blocks[static_cast<std::size_t>(b)];
      if (id < 0 || id >= limits.num_blocks) {
        refuse(i, s, "block id " + std::to_string(id) + " outside the pool of " + std::to_string(limits.num_blocks));
      }
    }
    for (const TokenId t : s.tokens) {
      if (t < 0 || t >= limits.vocab) refuse(i, s, "token id " + std::to_string(t) + " outside the vocabulary");
    }
    table_stride = std::max(table_stride, static_cast<int>(need));
    total += n;
  }
  if (total > limits.max_tokens) {
    throw UsageError("LlamaRunner::step: " + std::to_string(total) + " tokens exceed max_batched_tokens " +
                     std::to_string(limits.max_tokens));
  }
  return table_stride;
}

// A padding sequence of a CUDA-graph shape (StepPadding): token 0 at position 0 in `pad_block`.
ScheduledSequence filler(const StepPadding& pad) {
  ScheduledSequence s;
  s.id = -1;
  s.tokens = {0};
  s.start_position = 0;
  s.blocks = {pad.pad_block};
  s.sample = true;
  return s;
}

}  // namespace

StepMetadata build_step_metadata(const StepBatch& real, const StepLimits& limits, bool all_rows,
                                 const StepPadding& padding) {
  StepMetadata md;
  md.table_stride = validate(real, limits);
  const bool pad = padding.seqs > 0;
  if (pad) {
    if (padding.seqs < static_cast<int>(real.sequences.size()) || padding.table_stride < md.table_stride ||
        padding.pad_block < 0 || padding.seqs > limits.max_tokens) {
      throw UsageError("LlamaRunner::step: the batch does not fit its CUDA-graph shape");
    }
    md.table_stride = padding.table_stride;
  }
  // The batch's sequences, then (padding) as many fillers as its shape asks: read in place, not copied.
  const ScheduledSequence pad_seq = pad ? filler(padding) : ScheduledSequence{};
  md.num_seqs = pad ? padding.seqs : static_cast<int>(real.sequences.size());
  const auto seq = [&](int i) -> const ScheduledSequence& {
    return i < static_cast<int>(real.sequences.size()) ? real.sequences[static_cast<std::size_t>(i)] : pad_seq;
  };
  int total = 0;
  for (int i = 0; i < md.num_seqs; ++i) total += static_cast<int>(seq(i).tokens.size());
  md.num_tokens = total;

  // Work lists first (their sizes decide the layout).
  std::vector<std::int32_t> decode, logit_rows;
  std::vector<std::pair<int, int>> tiles;  // (sequence, first query)
  int token0 = 0;
  for (int i = 0; i < md.num_seqs; ++i) {
    const ScheduledSequence& s = seq(i);
    const int n = static_cast<int>(s.tokens.size());
    if (n == 1) {
      decode.push_back(i);
      md.max_decode_context = std::max(md.max_decode_context, s.start_position + 1);
    } else {
      for (int q0 = 0; q0 < n; q0 += k_prefill_tile_rows) tiles.emplace_back(i, q0);
    }
    if (all_rows || s.sample_all) {  // sample_all: speculative verification, an argmax after every token
      for (int t = 0; t < n; ++t) logit_rows.push_back(token0 + t);
    } else if (s.sample) {
      logit_rows.push_back(token0 + n - 1);
    }
    token0 += n;
  }
  // Longest first: a tile's work grows with its last query position, so the big ones start in the first
  // wave and the short ones fill the tail.
  const auto tile_end = [&](const std::pair<int, int>& t) {
    const ScheduledSequence& s = seq(t.first);
    return s.start_position + std::min(t.second + k_prefill_tile_rows, static_cast<int>(s.tokens.size()));
  };
  std::stable_sort(tiles.begin(), tiles.end(), [&](const auto& a, const auto& b) { return tile_end(a) > tile_end(b); });
  md.num_decode = static_cast<int>(decode.size());
  md.num_prefill_tiles = static_cast<int>(tiles.size());
  md.num_logit_rows = static_cast<int>(logit_rows.size());

  int at = 0;
  const auto take = [&](int count) { return std::exchange(at, at + count); };
  md.tokens = take(md.num_tokens);
  md.positions = take(md.num_tokens);
  md.slots = take(md.num_tokens);
  md.token_seq = take(md.num_tokens);
  md.query_start = take(md.num_seqs + 1);
  md.context_len = take(md.num_seqs);
  md.block_table = take(md.num_seqs * md.table_stride);
  md.decode_seqs = take(md.num_decode);
  md.prefill_tiles = take(2 * md.num_prefill_tiles);
  md.logit_rows = take(md.num_logit_rows);
  md.data.assign(static_cast<std::size_t>(at), 0);

  std::int32_t* d = md.data.data();
  token0 = 0;
  for (int i = 0; i < md.num_seqs; ++i) {
    const ScheduledSequence& s = seq(i);
    const int n = static_cast<int>(s.tokens.size());
    d[md.query_start + i] = token0;
    d[md.context_len + i] = s.start_position + n;
    const int need = (s.start_position + n + limits.block_size - 1) / limits.block_size;
    std::copy_n(s.blocks.begin(), need, d + md.block_table + static_cast<std::int64_t>(i) * md.table_stride);
    for (int t = 0; t < n; ++t) {
      const int pos = s.start_position + t;
      d[md.tokens + token0 + t] = s.tokens[static_cast<std::size_t>(t)];
      d[md.positions + token0 + t] = pos;
      d[md.slots + token0 + t] = s.blocks[static_cast<std::size_t>(pos / limits.block_size)] * limits.block_size +
                                 pos % limits.block_size;
      d[md.token_seq + token0 + t] = i;
    }
    token0 += n;
  }
  d[md.query_start + md.num_seqs] = token0;
  std::copy(decode.begin(), decode.end(), d + md.decode_seqs);
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    d[md.prefill_tiles + 2 * i] = tiles[i].first;
    d[md.prefill_tiles + 2 * i + 1] = tiles[i].second;
  }
  std::copy(logit_rows.begin(), logit_rows.end(), d + md.logit_rows);
  return md;
}

std::size_t max_step_metadata_ints(int tokens, int seqs, int table_stride) {
  const auto t = static_cast<std::size_t>(tokens), q = static_cast<std::size_t>(seqs);
  // build_step_metadata's arrays: 4 per token; query_start, context_len, a table row, a decode entry per
  // sequence (+1 for query_start's end); 2 per prefill tile, at most one per sequence and one per
  // k_prefill_tile_rows tokens; a logit row per token at most.
  const std::size_t tiles = q + t / k_prefill_tile_rows;
  return 4 * t + (q + 1) + q + q * static_cast<std::size_t>(table_stride) + q + 2 * tiles + t;
}

}  // namespace aisp::serving::gpu
