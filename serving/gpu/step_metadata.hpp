// What a step tells the GPU besides the weights: the flattened tokens, their positions and cache slots,
// each sequence's query range, context length and block table, and the work lists of the attention
// kernels, all int32 in one array so that a step costs one host-to-device copy. Plain C++ (no CUDA): the
// batch is validated here, before any GPU work, and the layout is testable without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "serving/runner_api.hpp"

namespace aisp::serving::gpu {

// Query rows per tile of the tensor-core prefill kernel (attention_prefill.cu): the host cuts each
// prefilling sequence into tiles this long.
constexpr int k_prefill_tile_rows = 64;

struct StepLimits {
  int block_size = 16;
  int num_blocks = 0;
  int max_tokens = 0;
  int max_context = 0;
  int vocab = 0;
};

// Offsets (in int32 elements) of each array inside `data`, and the counts that size the launches.
struct StepMetadata {
  int num_tokens = 0, num_seqs = 0, table_stride = 0;
  int num_decode = 0, num_prefill_tiles = 0, num_logit_rows = 0;
  int max_decode_context = 0;  // longest context among the decode sequences (sizes the split plan)
  int tokens = 0;              // [num_tokens] token ids
  int positions = 0;           // [num_tokens]
  int slots = 0;               // [num_tokens] physical block * block_size + offset
  int token_seq = 0;           // [num_tokens] index of the token's sequence in the batch
  int query_start = 0;         // [num_seqs + 1]
  int context_len = 0;         // [num_seqs] start_position + tokens
  int block_table = 0;         // [num_seqs][table_stride]
  int decode_seqs = 0;         // [num_decode] sequences with one token this step
  int prefill_tiles = 0;       // [num_prefill_tiles][2] (sequence, first query) of 64-query tiles
  int logit_rows = 0;          // [num_logit_rows] flattened token rows whose logits are computed
  std::vector<std::int32_t> data;
};

// A decode step shaped for a captured CUDA graph: `seqs` sequences (the batch's, then one-token padding
// sequences at position 0 whose single slot is `pad_block`, a KV block outside the engine's pool) and a
// block table `table_stride` wide, so that every array sits at the same offset for every batch of the
// same shape. seqs = 0: no padding, the table as wide as the batch needs.
struct StepPadding {
  int seqs = 0;
  int table_stride = 0;
  int pad_block = -1;
};

// Throws aisp::UsageError (one line naming the sequence and the problem) for a batch that breaks the
// runner_api.hpp contract or these limits (padding sequences are the runner's and are not checked).
// logit rows: in batch order, every token of a sequence with `sample_all` (speculative verification), the
// last token of one with `sample`; with all_rows, every token of every sequence (prefill_logits).
[[nodiscard]] StepMetadata build_step_metadata(const StepBatch& batch, const StepLimits& limits, bool all_rows,
                                               const StepPadding& padding = {});

// The most int32 elements build_step_metadata lays out for a step of at most `tokens` tokens in at most
// `seqs` sequences with block tables at most `table_stride` wide: a buffer this large holds the metadata
// of any such step (the runner sizes its graph and eager metadata buffers with it).
[[nodiscard]] std::size_t max_step_metadata_ints(int tokens, int seqs, int table_stride);

}  // namespace aisp::serving::gpu
