// The contract between the scheduler and whatever computes a forward pass (the GPU Llama runner, or a fake
// in CPU tests). Plain C++: no CUDA here, so the scheduler and the server build and test without a GPU.
//
// One engine step = one StepBatch: a list of sequences, each contributing a contiguous run of tokens
// (a whole prompt, a prefill chunk, or the one token of a decode) at known positions, with the KV-cache
// blocks that hold (and will hold) its keys and values. The runner writes the K/V of every scheduled
// token into its slot, attends causally over everything the sequence has cached so far plus the new
// tokens, and returns one sampled token for each sequence whose `sample` flag is set (the last chunk of a
// prompt, or a decode).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/error.hpp"

namespace aisp::serving {

using TokenId = std::int32_t;
using SequenceId = std::int64_t;

struct ScheduledSequence {
  SequenceId id = 0;
  std::vector<TokenId> tokens;        // the tokens computed this step (prompt chunk, or 1 for a decode)
  int start_position = 0;             // position of tokens[0]; tokens before it are already in the cache
  std::vector<std::int32_t> blocks;   // the sequence's block table: physical block ids, in order, covering
                                      // positions [0, start_position + tokens.size())
  bool sample = false;                // return a token for this sequence after this step
  // Speculative decoding's verification: return the argmax after every one of this sequence's
  // tokens (tokens.size() ids, in order; `sample` is then ignored). Its tokens are the last
  // accepted token and the k drafts, so the k + 1 ids verify the drafts and give the next token
  // (serving/speculative.hpp). A runner that cannot do this must refuse the step (UsageError).
  bool sample_all = false;
};

struct StepBatch {
  std::vector<ScheduledSequence> sequences;
  int block_size = 16;                // tokens per KV block (the block manager's)
  // Total tokens computed this step (sum of tokens.size()).
  [[nodiscard]] int token_count() const {
    int n = 0;
    for (const auto& s : sequences) n += static_cast<int>(s.tokens.size());
    return n;
  }
};

// Result of one step: for each sequence with sample == true, in the order of StepBatch::sequences,
// the next token (greedy: argmax of the logits); a sequence with sample_all contributes
// tokens.size() ids at its place in that order instead.
struct StepResult {
  std::vector<TokenId> sampled;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual StepResult step(const StepBatch& batch) = 0;
  // Capacity the runner was built for: KV blocks in its pool, and the largest step it accepts.
  [[nodiscard]] virtual int num_kv_blocks() const = 0;
  [[nodiscard]] virtual int block_size() const = 0;   // tokens per KV block: the scheduler must match
  [[nodiscard]] virtual int max_batched_tokens() const = 0;
  [[nodiscard]] virtual int vocab_size() const = 0;
  [[nodiscard]] virtual int max_context() const = 0;

  // Prefill/decode disaggregation (serving/disaggregated.hpp): copies the K/V of `source`'s blocks
  // src_blocks[i] into this runner's blocks dst_blocks[i], every layer's, complete when it returns.
  // `source` is a runner of the same model and block size (on another device, for the GPU runner)
  // whose engine keeps those blocks pinned meanwhile; it may be stepping on other blocks at the
  // same time, on its own thread. Called on this runner's engine thread, between steps. A runner
  // that cannot throws aisp::UsageError, as this default does.
  virtual void copy_kv_blocks_from(ModelRunner& source, std::span<const std::int32_t> src_blocks,
                                   std::span<const std::int32_t> dst_blocks) {
    (void)source;
    (void)src_blocks;
    (void)dst_blocks;
    throw UsageError("this model runner cannot receive K/V blocks from another runner");
  }
};

}  // namespace aisp::serving
