#include "serving/fake_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "core/base/error.hpp"

namespace aisp::serving {

namespace {

// FNV-1a over (position, id) pairs: order-sensitive, so a swapped or shifted block changes the
// result. Incremental, so that a sample_all sequence gets the token after each of its prefixes in
// one pass.
class HistoryHash {
 public:
  void add(std::size_t position, TokenId id) {
    mix(position);
    mix(static_cast<std::uint32_t>(id));
  }
  [[nodiscard]] TokenId token(int vocab_size) const {
    // The low bits of FNV are weak; fold the high ones in before the modulo.
    const std::uint64_t h = m_h ^ (m_h >> 29);
    return static_cast<TokenId>(h % static_cast<std::uint64_t>(vocab_size));
  }

 private:
  void mix(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      m_h ^= (v >> (8 * i)) & 0xffU;
      m_h *= 1099511628211ULL;
    }
  }
  std::uint64_t m_h = 1469598103934665603ULL;
};

}  // namespace

TokenId fake_next_token(const std::vector<TokenId>& tokens, int vocab_size) {
  HistoryHash hash;
  for (std::size_t p = 0; p < tokens.size(); ++p) hash.add(p, tokens[p]);
  return hash.token(vocab_size);
}

FakeGeneration fake_reference(const GenerationRequest& request, int vocab_size,
                              TokenId eos_token_id, int max_context) {
  FakeGeneration out;
  std::vector<TokenId> history = request.prompt;
  const auto& stops = request.stop_token_ids;
  while (true) {
    const TokenId t = fake_next_token(history, vocab_size);
    history.push_back(t);
    out.tokens.push_back(t);
    if (std::find(stops.begin(), stops.end(), t) != stops.end() ||
        (!request.ignore_eos && eos_token_id >= 0 && t == eos_token_id)) {
      out.reason = FinishReason::stop;
      return out;
    }
    if (static_cast<int>(out.tokens.size()) >= request.max_tokens ||
        static_cast<int>(history.size()) >= max_context) {
      out.reason = FinishReason::length;
      return out;
    }
  }
}

FakeRunner::FakeRunner(FakeRunnerOptions options) : m_options(options) {
  if (options.num_kv_blocks <= 0 || options.block_size <= 0 || options.max_batched_tokens <= 0 ||
      options.vocab_size <= 0 || options.max_context <= 0) {
    throw UsageError("fake runner: every size must be positive");
  }
  const auto slots = static_cast<std::size_t>(options.num_kv_blocks) *
                     static_cast<std::size_t>(options.block_size);
  m_cache.assign(slots, -1);
  m_written_at.assign(slots, -1);
  m_writer.assign(slots, -1);
  m_block_owner.assign(static_cast<std::size_t>(options.num_kv_blocks), {-1, -1});
}

void FakeRunner::copy_kv_blocks_from(ModelRunner& source,
                                     std::span<const std::int32_t> src_blocks,
                                     std::span<const std::int32_t> dst_blocks) {
  const auto* from = dynamic_cast<const FakeRunner*>(&source);
  if (from == nullptr) throw UsageError("fake runner: K/V can only come from another fake runner");
  if (from->m_options.block_size != m_options.block_size) {
    throw UsageError(fmt::format("fake runner: K/V blocks of {} tokens into blocks of {}",
                                 from->m_options.block_size, m_options.block_size));
  }
  if (src_blocks.size() != dst_blocks.size()) {
    throw UsageError(fmt::format("fake runner: {} source blocks for {} destination blocks",
                                 src_blocks.size(), dst_blocks.size()));
  }
  for (std::size_t i = 0; i < src_blocks.size(); ++i) {
    if (src_blocks[i] < 0 || src_blocks[i] >= from->m_options.num_kv_blocks ||
        dst_blocks[i] < 0 || dst_blocks[i] >= m_options.num_kv_blocks) {
      throw UsageError(
          fmt::format("fake runner: block copy {} -> {} outside a pool", src_blocks[i], dst_blocks[i]));
    }
  }
  for (std::size_t i = 0; i < src_blocks.size(); ++i) {
    for (int slot = 0; slot < m_options.block_size; ++slot) {
      const std::size_t to = slot_index(dst_blocks[i], slot);
      m_cache[to] = from->m_cache[from->slot_index(src_blocks[i], slot)];
      // Written before this engine's next step, by nobody in it.
      m_written_at[to] = -1;
      m_writer[to] = -1;
    }
  }
  m_blocks_received += static_cast<std::int64_t>(src_blocks.size());
}

std::size_t FakeRunner::slot_index(std::int32_t block, int position) const {
  return static_cast<std::size_t>(block) * static_cast<std::size_t>(m_options.block_size) +
         static_cast<std::size_t>(position % m_options.block_size);
}

StepResult FakeRunner::step(const StepBatch& batch) {
  const std::int64_t step_index = m_steps++;
  if (step_index == m_fail_at) {
    throw std::runtime_error(fmt::format("fake runner: injected failure at step {}", step_index));
  }
  if (batch.block_size != m_options.block_size) {
    throw UsageError(
        fmt::format("fake runner: block size {} != {}", batch.block_size, m_options.block_size));
  }
  const int total = batch.token_count();
  if (total > m_options.max_batched_tokens) {
    throw UsageError(fmt::format("fake runner: step of {} tokens > max {}", total,
                                 m_options.max_batched_tokens));
  }
  m_largest_step = std::max(m_largest_step, total);
  std::unordered_set<SequenceId> seen;
  for (const auto& s : batch.sequences) {
    if (!seen.insert(s.id).second)
      throw UsageError(fmt::format("fake runner: sequence {} twice", s.id));
    const int end = s.start_position + static_cast<int>(s.tokens.size());
    if (s.tokens.empty() || s.start_position < 0 || end > m_options.max_context) {
      throw UsageError(
          fmt::format("fake runner: sequence {} positions [{}, {})", s.id, s.start_position, end));
    }
    if (static_cast<long long>(s.blocks.size()) * m_options.block_size < end) {
      throw UsageError(fmt::format("fake runner: sequence {} has {} blocks for {} positions", s.id,
                                   s.blocks.size(), end));
    }
    for (auto b : s.blocks) {
      if (b < 0 || b >= m_options.num_kv_blocks)
        throw UsageError(fmt::format("fake runner: block {}", b));
      // Without prefix sharing a block belongs to one sequence: two tables listing it in one step
      // means one of them holds a block that was freed and handed out again.
      auto& owner = m_block_owner[static_cast<std::size_t>(b)];
      if (!m_options.allow_shared_blocks && owner.first == m_steps && owner.second != s.id) {
        throw UsageError(fmt::format("fake runner: block {} in the tables of sequences {} and {}",
                                     b, owner.second, s.id));
      }
      owner = {m_steps, s.id};
    }
    for (auto t : s.tokens) {
      if (t < 0 || t >= m_options.vocab_size)
        throw UsageError(fmt::format("fake runner: token {}", t));
    }
  }
  // Every write before any read: two live sequences sharing a block by mistake then corrupt each
  // other whatever their order in the batch. A GPU runner writes all K/V of a step in parallel, so
  // a slot written by two sequences, or written by one and read by another, in the same step is a
  // race there even when the order here would hide it: refused.
  for (const auto& s : batch.sequences) {
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      const int p = s.start_position + static_cast<int>(i);
      const auto block = s.blocks[static_cast<std::size_t>(p / m_options.block_size)];
      const std::size_t index = slot_index(block, p);
      if (m_written_at[index] == m_steps && m_writer[index] != s.id) {
        throw UsageError(
            fmt::format("fake runner: sequences {} and {} both write block {} slot {} in one step",
                        m_writer[index], s.id, block, p % m_options.block_size));
      }
      m_written_at[index] = m_steps;
      m_writer[index] = s.id;
      m_cache[index] = s.tokens[i];
    }
  }
  StepResult result;
  for (const auto& s : batch.sequences) {
    if (!s.sample && !s.sample_all) continue;
    const int end = s.start_position + static_cast<int>(s.tokens.size());
    // sample_all: an id after every scheduled position; sample: after the last one only.
    const int first_sampled = s.sample_all ? s.start_position : end - 1;
    HistoryHash hash;
    for (int p = 0; p < end; ++p) {
      const auto block = s.blocks[static_cast<std::size_t>(p / m_options.block_size)];
      const std::size_t index = slot_index(block, p);
      if (m_written_at[index] == m_steps && m_writer[index] != s.id) {
        throw UsageError(fmt::format(
            "fake runner: sequence {} reads block {} slot {} written by {} in the same step", s.id,
            block, p % m_options.block_size, m_writer[index]));
      }
      const TokenId t = m_cache[index];
      if (t < 0) {
        throw DataError(
            fmt::format("fake runner: sequence {} reads position {} never written", s.id, p));
      }
      hash.add(static_cast<std::size_t>(p), t);
      if (p >= first_sampled) result.sampled.push_back(hash.token(m_options.vocab_size));
    }
  }
  if (m_options.step_sleep.count() > 0) std::this_thread::sleep_for(m_options.step_sleep);
  return result;
}

}  // namespace aisp::serving
