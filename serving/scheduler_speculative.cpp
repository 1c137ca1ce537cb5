// Speculative decoding in the scheduler (docs/serving.md, "Speculative decoding"): the proposal
// before a step, the drafts' share of the step, and the verification after it. The rules themselves
// are serving/speculative.hpp's (verify_greedy, FinishRule); this file decides who drafts how much,
// and leaves each sequence's tokens, `computed` and finish exactly where plain decoding would have.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "serving/scheduler.hpp"
#include "serving/scheduler_internal.hpp"

namespace aisp::serving {

FinishRule Scheduler::finish_rule_of(const Sequence& seq) const {
  FinishRule rule;
  rule.stop_token_ids = seq.stop_token_ids;
  rule.eos_token_id = seq.ignore_eos ? -1 : m_config.eos_token_id;
  rule.max_tokens = seq.max_tokens;
  rule.max_context = m_config.max_context;
  return rule;
}

// Every running sequence about to decode, in admission order, in one propose() call (a draft model
// then runs its steps for all of them together). Each may get up to min(k, max_emit - 1) drafts: a
// verification emits at most drafts + 1 tokens, and max_emit is what max_tokens and max_context
// still allow, so no verification has to be cut by length and no draft position passes max_context.
void Scheduler::propose_drafts() {
  std::vector<DraftRequest> asks;
  std::vector<Sequence*> askers;
  for (Sequence* seq : m_running) {
    seq->draft.clear();
    if (seq->padding || !seq->is_decode()) continue;
    const int max_emit = finish_rule_of(*seq).max_emit(seq->generated(), seq->size());
    const int max_draft = std::min(m_config.num_draft, max_emit - 1);
    if (max_draft <= 0) continue;
    asks.push_back({seq->id, seq->tokens, max_draft});
    askers.push_back(seq);
  }
  if (asks.empty()) return;
  std::vector<std::vector<TokenId>> proposals;
  std::string failure;
  try {
    proposals = m_config.drafter->propose(asks);
    if (proposals.size() != asks.size()) {
      failure = fmt::format("drafter answered {} of {} requests", proposals.size(), asks.size());
    }
  } catch (const std::exception& e) {
    failure = fmt::format("drafter failed: {}", e.what());
  } catch (...) {
    failure = "drafter threw a non-standard exception";
  }
  if (!failure.empty()) {
    // As a runner failure fails its step's sequences: decoding on without drafts would hide a
    // broken drafter behind a slower server.
    for (Sequence* seq : askers) finish(*seq, FinishReason::error, -1, failure);
    return;
  }
  for (std::size_t i = 0; i < asks.size(); ++i) {
    // A drafter may be wrong but not unsafe: past max_draft a draft could pass max_context, and an
    // id outside the vocabulary would make the runner refuse the whole step.
    std::vector<TokenId>& draft = proposals[i];
    auto end = draft.begin() + std::min<std::ptrdiff_t>(asks[i].max_draft,
                                                        static_cast<std::ptrdiff_t>(draft.size()));
    end = std::find_if(draft.begin(), end, [&](TokenId t) {
      return t < 0 || (m_config.vocab_size > 0 && t >= m_config.vocab_size);
    });
    draft.erase(end, draft.end());
    askers[i]->draft = std::move(draft);
  }
}

// The drafts come after every decode and every prefill chunk of the running sequences took its
// budget and blocks (preempting if it had to), and take only what is left: the budget, and free
// blocks. So a draft never preempts anyone and never pushes a decode or a prefill chunk out of a
// step. When either runs short the drafts are cut, down to a plain decode, first come first served
// in admission order: a decode's or a chunk's tokens are certain progress, a draft is a token only
// if it is accepted. They do come before the admissions, as vLLM v1 schedules the running requests,
// speculative tokens included, before the waiting ones: a newcomer's prefill then waits at most for
// k tokens per running sequence.
void Scheduler::schedule_drafts(std::vector<Planned>& plan, int& budget) {
  for (Planned& p : plan) {
    if (budget <= 0) return;
    Sequence& seq = *p.seq;
    if (p.padding || p.num_tokens != 1 || !seq.is_decode() || seq.draft.empty()) continue;
    // Positions the sequence's table and the free blocks can hold past its last token.
    const int table = static_cast<int>(m_blocks.block_table(seq.id).size());
    const int room = (table + m_blocks.num_free()) * m_config.block_size - seq.size();
    const int drafts = std::min({static_cast<int>(seq.draft.size()), budget, room});
    if (drafts <= 0) continue;
    if (!m_blocks.grow_to(seq.id, seq.size() + drafts))
      throw std::logic_error("scheduler: grow failed after check");
    p.drafts = drafts;
    p.num_tokens += drafts;
    budget -= drafts;
  }
}

void Scheduler::verify_drafts(Sequence& seq, std::span<const TokenId> draft,
                              std::span<const TokenId> target) {
  for (const TokenId t : target) {
    if (t < 0 || (m_config.vocab_size > 0 && t >= m_config.vocab_size)) {
      finish(seq, FinishReason::error, -1,
             fmt::format("runner sampled token id {} outside the vocabulary", t));
      return;
    }
  }
  const FinishRule rule = finish_rule_of(seq);
  const Verification v = verify_greedy(draft, target, seq.computed, rule,
                                       rule.max_emit(seq.generated(), seq.size()));
  m_acceptance.record(static_cast<int>(draft.size()), v.accepted,
                      static_cast<int>(v.emitted.size()));
  // Every emitted token but the last is an accepted draft, whose K/V this step wrote. verify_greedy
  // cut the run at the first token that ends the sequence, so only the last one can.
  for (std::size_t i = 0; i + 1 < v.emitted.size(); ++i) {
    if (append_token(seq, v.emitted[i]))
      throw std::logic_error("scheduler: a sequence ended inside a verified run");
  }
  // The rejected drafts' slots, at kv_valid and past it, are stale: the sequence's next step starts
  // at kv_valid and writes them before anything reads them. Their blocks stay in the table rather
  // than going back (roll_back_table's `released`): the next verification needs those positions
  // again (with as many drafts it ends past this one), a sequence holds at most ceil(k /
  // block_size) such blocks, and giving them back would need the block manager to shorten a table.
  // With prefix caching, register_blocks indexes only blocks wholly below `computed`, so a block is
  // never published while one of its slots is stale.
  seq.computed = v.kv_valid;
  if (m_config.prefix_cache) m_blocks.register_blocks(seq.id, seq.tokens, seq.computed);
  append_token(seq, v.emitted.back());
}

}  // namespace aisp::serving
