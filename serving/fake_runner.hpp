// FakeRunner: a ModelRunner on the CPU for testing the scheduler and the engine without a GPU or a
// model.
//
// It behaves like a model in the one way that matters to a scheduler: the next token depends on the
// whole token history, and the runner reads that history only through its KV cache. Each scheduled
// token's id is written into its slot cache[block][position % block_size]; a sampled token is a
// hash of the ids read back through the block table for positions [0, end). So any bookkeeping bug
// (a wrong or stale block, a block freed and reused while its sequence still lives, a prefix not
// recomputed after preemption) changes the history the runner sees and the token it returns, and
// the test comparing against fake_reference() catches it. Slots start out poisoned (-1): reading
// one that was never written fails. A sample_all sequence (speculative verification) gets the hash
// of each prefix ending at one of its scheduled positions: a stale slot left by a rejected draft
// and read again changes those ids just as well.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "serving/engine_api.hpp"
#include "serving/runner_api.hpp"

namespace aisp::serving {

struct FakeRunnerOptions {
  int num_kv_blocks = 256;
  int block_size = 16;
  int max_batched_tokens = 256;
  int vocab_size = 1000;
  int max_context = 4096;
  std::chrono::microseconds step_sleep{0};  // simulated step time
  bool allow_shared_blocks = false;         // false: a block in two tables of one step is refused
};

// The token a sequence with history `tokens` produces next: a hash of every id and its position,
// modulo the vocabulary.
[[nodiscard]] TokenId fake_next_token(const std::vector<TokenId>& tokens, int vocab_size);

// The tokens an engine over a FakeRunner must produce for `request` (finish rules as the
// scheduler's: stop ids, eos unless ignore_eos, max_tokens, max_context), and why it ends.
struct FakeGeneration {
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::none;
};
[[nodiscard]] FakeGeneration fake_reference(const GenerationRequest& request, int vocab_size,
                                            TokenId eos_token_id = -1, int max_context = 1 << 30);

class FakeRunner final : public ModelRunner {
 public:
  explicit FakeRunner(FakeRunnerOptions options = {});

  // Throws aisp::UsageError on a batch breaking the contract (block size, budget, a block outside
  // the pool, a table too short, a token outside the vocabulary, a sequence twice, a block in two
  // tables (unless allow_shared_blocks), a KV slot written by two sequences or written by one and
  // read by another in the same step), aisp::DataError when a sampled history crosses a
  // never-written slot, and std::runtime_error on the step set by fail_at_step.
  StepResult step(const StepBatch& batch) override;

  [[nodiscard]] int num_kv_blocks() const override { return m_options.num_kv_blocks; }
  [[nodiscard]] int block_size() const override { return m_options.block_size; }
  [[nodiscard]] int max_batched_tokens() const override { return m_options.max_batched_tokens; }
  [[nodiscard]] int vocab_size() const override { return m_options.vocab_size; }
  [[nodiscard]] int max_context() const override { return m_options.max_context; }

  // Copies the slots (token ids, poison included) of another FakeRunner's blocks into this one's,
  // as a GPU runner copies K/V: a decode engine that reads a block whose copy was skipped reads
  // poison (DataError) or a stale history (a wrong token). UsageError for a source that is not a
  // FakeRunner, another block size, lists of different lengths, or a block outside either pool.
  // Reads only the source's cache slots of `src_blocks`, which the source's engine keeps pinned:
  // safe while the source steps on other blocks on its own thread.
  void copy_kv_blocks_from(ModelRunner& source, std::span<const std::int32_t> src_blocks,
                           std::span<const std::int32_t> dst_blocks) override;
  [[nodiscard]] std::int64_t blocks_received() const { return m_blocks_received; }

  // Makes step number `step` (0-based, counting every call) throw, to test error handling.
  void fail_at_step(std::int64_t step) { m_fail_at = step; }
  [[nodiscard]] std::int64_t steps() const { return m_steps; }
  [[nodiscard]] int largest_step_tokens() const { return m_largest_step; }

 private:
  [[nodiscard]] std::size_t slot_index(std::int32_t block, int position) const;

  FakeRunnerOptions m_options;
  std::vector<TokenId> m_cache;  // num_kv_blocks * block_size token ids: the "K/V"
  std::vector<std::int64_t>
      m_written_at;                  // per slot: the last step that wrote it (m_steps after ++)
  std::vector<SequenceId> m_writer;  // per slot: which sequence wrote it then
  std::vector<std::pair<std::int64_t, SequenceId>>
      m_block_owner;  // per block: (step, sequence) last listing it
  std::int64_t m_steps = 0;
  std::int64_t m_blocks_received = 0;
  std::int64_t m_fail_at = -1;
  int m_largest_step = 0;
};

}  // namespace aisp::serving
