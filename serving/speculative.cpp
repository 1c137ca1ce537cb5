#include "serving/speculative.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/base/error.hpp"

namespace aisp::serving {

bool FinishRule::is_stop(TokenId token) const {
  if (eos_token_id >= 0 && token == eos_token_id) return true;
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), token) != stop_token_ids.end();
}

int FinishRule::max_emit(int generated, int length) const {
  return std::max(0, std::min(max_tokens - generated, max_context - length));
}

FinishRule finish_rule_for(const GenerationRequest& request, TokenId eos_token_id,
                           int max_context) {
  FinishRule rule;
  rule.stop_token_ids = request.stop_token_ids;
  rule.eos_token_id = request.ignore_eos ? -1 : eos_token_id;
  rule.max_tokens = request.max_tokens;
  rule.max_context = max_context;
  return rule;
}

Verification verify_greedy(std::span<const TokenId> draft, std::span<const TokenId> target,
                           int first_position, const FinishRule& rule, int max_emit) {
  if (target.size() != draft.size() + 1) {
    throw UsageError(fmt::format("verify: {} target ids for {} drafts (want drafts + 1)",
                                 target.size(), draft.size()));
  }
  if (first_position < 0) throw UsageError(fmt::format("verify: position {}", first_position));
  if (max_emit < 1) throw UsageError(fmt::format("verify: max_emit {} < 1", max_emit));
  Verification v;
  while (v.accepted < static_cast<int>(draft.size()) &&
         draft[static_cast<std::size_t>(v.accepted)] ==
             target[static_cast<std::size_t>(v.accepted)]) {
    ++v.accepted;
  }
  // The accepted drafts equal target[0, accepted), so what the sequence gains is target[0,
  // accepted]: each the target's own argmax after exactly the tokens before it.
  for (int i = 0; i <= v.accepted; ++i) {
    const TokenId t = target[static_cast<std::size_t>(i)];
    v.emitted.push_back(t);
    if (rule.is_stop(t)) {
      v.finish = FinishReason::stop;
      break;
    }
    if (static_cast<int>(v.emitted.size()) >= max_emit) {
      v.finish = FinishReason::length;
      break;
    }
  }
  v.kv_valid = first_position + static_cast<int>(v.emitted.size());
  return v;
}

TableRollback roll_back_table(std::span<const BlockId> table, int kv_valid, int block_size) {
  if (kv_valid < 0 || block_size <= 0) {
    throw UsageError(fmt::format("roll back: kv_valid {} block size {}", kv_valid, block_size));
  }
  const auto keep = static_cast<std::size_t>((kv_valid + block_size - 1) / block_size);
  if (keep > table.size()) {
    throw UsageError(fmt::format("roll back: {} valid positions need {} blocks, the table has {}",
                                 kv_valid, keep, table.size()));
  }
  TableRollback r;
  r.kept.assign(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(keep));
  r.released.assign(table.begin() + static_cast<std::ptrdiff_t>(keep), table.end());
  return r;
}

// ---- acceptance accounting ----

void AcceptanceStats::record(int proposed, int accepted, int emitted) {
  if (proposed < 0 || accepted < 0 || accepted > proposed || emitted < 0 ||
      emitted > accepted + 1) {
    throw UsageError(
        fmt::format("acceptance: proposed {} accepted {} emitted {}", proposed, accepted, emitted));
  }
  ++m_verifications;
  m_proposed += proposed;
  m_accepted += accepted;
  m_emitted += emitted;
  if (static_cast<int>(m_proposed_at.size()) < proposed) {
    m_proposed_at.resize(static_cast<std::size_t>(proposed), 0);
    m_accepted_at.resize(static_cast<std::size_t>(proposed), 0);
  }
  for (int i = 0; i < proposed; ++i) {
    ++m_proposed_at[static_cast<std::size_t>(i)];
    if (i < accepted) ++m_accepted_at[static_cast<std::size_t>(i)];
  }
}

void AcceptanceStats::merge(const AcceptanceStats& other) {
  m_verifications += other.m_verifications;
  m_proposed += other.m_proposed;
  m_accepted += other.m_accepted;
  m_emitted += other.m_emitted;
  if (m_proposed_at.size() < other.m_proposed_at.size()) {
    m_proposed_at.resize(other.m_proposed_at.size(), 0);
    m_accepted_at.resize(other.m_proposed_at.size(), 0);
  }
  for (std::size_t i = 0; i < other.m_proposed_at.size(); ++i) {
    m_proposed_at[i] += other.m_proposed_at[i];
    m_accepted_at[i] += other.m_accepted_at[i];
  }
}

double AcceptanceStats::acceptance_rate() const {
  return m_proposed == 0 ? 0.0 : static_cast<double>(m_accepted) / static_cast<double>(m_proposed);
}

double AcceptanceStats::tokens_per_verification() const {
  return m_verifications == 0
             ? 0.0
             : static_cast<double>(m_emitted) / static_cast<double>(m_verifications);
}

std::int64_t AcceptanceStats::proposed_at(int i) const {
  return i < 0 || i >= positions() ? 0 : m_proposed_at[static_cast<std::size_t>(i)];
}

double AcceptanceStats::acceptance_at(int i) const {
  const std::int64_t n = proposed_at(i);
  return n == 0 ? 0.0
                : static_cast<double>(m_accepted_at[static_cast<std::size_t>(i)]) /
                      static_cast<double>(n);
}

std::string AcceptanceStats::summary() const {
  std::string s = fmt::format("acceptance {:.3f} ({}/{} drafts), {:.2f} tokens/verification",
                              acceptance_rate(), m_accepted, m_proposed, tokens_per_verification());
  if (positions() > 0) {
    s += ", by position [";
    for (int i = 0; i < positions(); ++i)
      s += fmt::format("{}{:.2f}", i ? " " : "", acceptance_at(i));
    s += "]";
  }
  return s;
}

// ---- prompt lookup ----

void validate(const PromptLookupOptions& options) {
  if (options.min_ngram < 1 || options.max_ngram < options.min_ngram || options.num_draft < 0) {
    throw UsageError(
        fmt::format("prompt lookup: need 1 <= min_ngram ({}) <= max_ngram ({}) and "
                    "num_draft ({}) >= 0",
                    options.min_ngram, options.max_ngram, options.num_draft));
  }
}

std::vector<TokenId> prompt_lookup(std::span<const TokenId> tokens,
                                   const PromptLookupOptions& options, int max_draft) {
  validate(options);
  const int len = static_cast<int>(tokens.size());
  const int k = std::min(options.num_draft, max_draft);
  std::vector<TokenId> draft;
  if (k <= 0) return draft;
  // An n-gram needs an earlier occurrence, so at most len - 1 long.
  for (int n = std::min(options.max_ngram, len - 1); n >= options.min_ngram; --n) {
    const auto suffix = tokens.subspan(static_cast<std::size_t>(len - n));
    for (int m = len - n - 1; m >= 0; --m) {  // most recent first
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + m)) continue;
      // Copy what followed; past the end the copy reads its own output (period len - n - m).
      for (int i = 0; i < k; ++i) {
        const int from = m + n + i;
        draft.push_back(from < len ? tokens[static_cast<std::size_t>(from)]
                                   : draft[static_cast<std::size_t>(from - len)]);
      }
      return draft;
    }
  }
  return draft;
}

PromptLookupDrafter::PromptLookupDrafter(PromptLookupOptions options) : m_options(options) {
  validate(options);
}

std::vector<std::vector<TokenId>> PromptLookupDrafter::propose(
    std::span<const DraftRequest> requests) {
  std::vector<std::vector<TokenId>> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(prompt_lookup(r.tokens, m_options, r.max_draft));
  return out;
}

// ---- a draft model ----

ModelDrafter::ModelDrafter(ModelRunner& runner)
    : m_runner(runner), m_blocks(runner.num_kv_blocks(), runner.block_size()) {}

void ModelDrafter::release(SequenceId id) {
  m_blocks.free_sequence(id);
  m_cached.erase(id);
}

namespace {

struct DraftWork {
  std::size_t index;  // into the requests
  SequenceId id;
  std::vector<TokenId> pending;  // tokens still to compute before the first draft
  int want;                      // drafts to produce
  bool stuck = false;            // out of KV blocks: propose what it has
};

}  // namespace

std::vector<std::vector<TokenId>> ModelDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<std::vector<TokenId>> out(requests.size());
  std::vector<DraftWork> work;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    const int len = static_cast<int>(r.tokens.size());
    const int want = std::min(r.max_draft, m_runner.max_context() - len);
    if (want <= 0 || len == 0) continue;
    auto& cached = m_cached[r.id];
    // Valid: the common prefix with the sequence (later cached tokens were rejected drafts), but
    // never the last token, whose logits give the first draft.
    const auto mismatch =
        std::mismatch(cached.begin(), cached.end(), r.tokens.begin(), r.tokens.end());
    const int valid = std::min(static_cast<int>(mismatch.first - cached.begin()), len - 1);
    cached.resize(static_cast<std::size_t>(valid));
    work.push_back({i, r.id, std::vector<TokenId>(r.tokens.begin() + valid, r.tokens.end()), want});
  }
  // Each step: the sequences still prefilling take a chunk, the others decode their last draft.
  while (true) {
    StepBatch batch;
    batch.block_size = m_runner.block_size();
    int budget = m_runner.max_batched_tokens();
    std::vector<DraftWork*> scheduled;
    for (auto& w : work) {
      auto& drafts = out[w.index];
      if (w.stuck || budget == 0 || static_cast<int>(drafts.size()) >= w.want) continue;
      auto& cached = m_cached[w.id];
      ScheduledSequence s;
      s.id = w.id;
      s.start_position = static_cast<int>(cached.size());
      if (!w.pending.empty()) {
        const int n = std::min(static_cast<int>(w.pending.size()), budget);
        s.tokens.assign(w.pending.begin(), w.pending.begin() + n);
        s.sample = n == static_cast<int>(w.pending.size());
      } else {
        s.tokens = {drafts.back()};
        s.sample = true;
      }
      if (!m_blocks.grow_to(w.id, s.start_position + static_cast<int>(s.tokens.size()))) {
        w.stuck = true;
        continue;
      }
      s.blocks = m_blocks.block_table(w.id);
      budget -= static_cast<int>(s.tokens.size());
      batch.sequences.push_back(std::move(s));
      scheduled.push_back(&w);
    }
    if (batch.sequences.empty()) break;
    const StepResult result = m_runner.step(batch);
    ++m_steps;
    std::size_t ids = 0;
    for (const auto& s : batch.sequences) ids += s.sample ? 1 : 0;
    if (result.sampled.size() != ids) {
      throw DataError(fmt::format("model drafter: runner returned {} ids for {} sampled sequences",
                                  result.sampled.size(), ids));
    }
    std::size_t at = 0;
    for (std::size_t i = 0; i < scheduled.size(); ++i) {
      DraftWork& w = *scheduled[i];
      const auto& s = batch.sequences[i];
      auto& cached = m_cached[w.id];
      cached.insert(cached.end(), s.tokens.begin(), s.tokens.end());
      if (!w.pending.empty()) {
        w.pending.erase(w.pending.begin(),
                        w.pending.begin() + static_cast<std::ptrdiff_t>(s.tokens.size()));
      }
      if (s.sample) out[w.index].push_back(result.sampled[at++]);
    }
  }
  return out;
}

// ---- the driver ----

namespace {

struct DriverSequence {
  SequenceId id = 0;
  std::vector<TokenId> tokens;  // prompt + generated
  int computed = 0;             // positions with valid K/V
  int generated = 0;
  FinishRule rule;
  bool done = false;
  std::vector<TokenId> draft;  // this step's proposal
};

struct Scheduled {
  DriverSequence* seq;
  int first_position;  // the position whose argmax is the step's first id for
                       // this sequence
  int num_ids;         // ids the runner returns for it (0: a prefill chunk that does
                       // not sample)
  bool verifying;      // a decode-phase verification (counted in the stats)
};

}  // namespace

SpeculativeRun generate_speculative(ModelRunner& runner, Drafter* drafter,
                                    const std::vector<GenerationRequest>& requests,
                                    const SpeculativeOptions& options) {
  if (options.num_draft < 0) throw UsageError("speculative: num_draft < 0");
  const int max_context = runner.max_context();
  std::vector<DriverSequence> seqs(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (r.prompt.empty() || r.max_tokens < 1 ||
        static_cast<int>(r.prompt.size()) + 1 > max_context) {
      throw UsageError(
          fmt::format("speculative: request {} cannot run (prompt {}, max_tokens {}, "
                      "context {})",
                      i, r.prompt.size(), r.max_tokens, max_context));
    }
    seqs[i].id = static_cast<SequenceId>(i);
    seqs[i].tokens = r.prompt;
    seqs[i].rule = finish_rule_for(r, options.eos_token_id, max_context);
  }
  BlockManager blocks(runner.num_kv_blocks(), runner.block_size());
  SpeculativeRun run;
  run.outputs.resize(requests.size());
  auto finish = [&](DriverSequence& s, FinishReason reason) {
    s.done = true;
    run.outputs[static_cast<std::size_t>(s.id)].reason = reason;
    blocks.free_sequence(s.id);
    if (drafter) drafter->release(s.id);
  };

  while (std::any_of(seqs.begin(), seqs.end(), [](const auto& s) { return !s.done; })) {
    // Drafts for every sequence past its prefill (computed == length - 1: only the last token lacks
    // K/V). At most max_emit - 1 of them: a verification emits at most accepted + 1 tokens.
    std::vector<DraftRequest> asks;
    std::vector<DriverSequence*> askers;
    for (auto& s : seqs) {
      s.draft.clear();
      const int length = static_cast<int>(s.tokens.size());
      if (s.done || s.computed != length - 1 || !drafter || options.num_draft == 0) continue;
      const int k = std::min(options.num_draft, s.rule.max_emit(s.generated, length) - 1);
      if (k > 0) {
        asks.push_back({s.id, s.tokens, k});
        askers.push_back(&s);
      }
    }
    if (!asks.empty()) {
      auto proposals = drafter->propose(asks);
      if (proposals.size() != asks.size()) {
        throw DataError(fmt::format("speculative: drafter answered {} of {} requests",
                                    proposals.size(), asks.size()));
      }
      for (std::size_t i = 0; i < asks.size(); ++i) {
        auto& p = proposals[i];
        if (static_cast<int>(p.size()) > asks[i].max_draft)
          p.resize(static_cast<std::size_t>(asks[i].max_draft));
        askers[i]->draft = std::move(p);
      }
    }

    StepBatch batch;
    batch.block_size = runner.block_size();
    int budget = runner.max_batched_tokens();
    std::vector<Scheduled> plan;
    for (auto& s : seqs) {
      if (s.done || budget == 0) continue;
      const int length = static_cast<int>(s.tokens.size());
      ScheduledSequence ss;
      ss.id = s.id;
      ss.start_position = s.computed;
      Scheduled sc{&s, 0, 0, false};
      if (s.computed < length - 1) {  // prefill chunk; samples when it reaches the end
        const int n = std::min(length - s.computed, budget);
        ss.tokens.assign(s.tokens.begin() + s.computed, s.tokens.begin() + s.computed + n);
        ss.sample = s.computed + n == length;
        sc = {&s, s.computed + n - 1, ss.sample ? 1 : 0, false};
      } else {  // verification: the last token, then the drafts that fit the
                // budget
        if (static_cast<int>(s.draft.size()) > budget - 1)
          s.draft.resize(static_cast<std::size_t>(budget - 1));
        ss.tokens.push_back(s.tokens.back());
        ss.tokens.insert(ss.tokens.end(), s.draft.begin(), s.draft.end());
        // No drafts: a plain decode (keeps the step graphable on the GPU runner).
        ss.sample = s.draft.empty();
        ss.sample_all = !s.draft.empty();
        sc = {&s, s.computed, static_cast<int>(ss.tokens.size()), true};
        run.start_positions.push_back(s.computed);
      }
      const int end = ss.start_position + static_cast<int>(ss.tokens.size());
      if (!blocks.grow_to(s.id, end)) {
        throw UsageError(
            fmt::format("speculative: out of KV blocks ({} in the pool) growing "
                        "sequence {} to {} positions; this driver does not preempt",
                        blocks.num_blocks(), s.id, end));
      }
      ss.blocks = blocks.block_table(s.id);
      budget -= static_cast<int>(ss.tokens.size());
      batch.sequences.push_back(std::move(ss));
      plan.push_back(sc);
    }

    const StepResult result = runner.step(batch);
    ++run.steps;
    std::size_t expected = 0;
    for (const auto& p : plan) expected += static_cast<std::size_t>(p.num_ids);
    if (result.sampled.size() != expected) {
      throw DataError(fmt::format("speculative: runner returned {} ids, the step needs {}",
                                  result.sampled.size(), expected));
    }
    std::size_t at = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Scheduled& p = plan[i];
      DriverSequence& s = *p.seq;
      const int scheduled = static_cast<int>(batch.sequences[i].tokens.size());
      if (p.num_ids == 0) {  // a prefill chunk that samples nothing: all of it is valid
        s.computed += scheduled;
        continue;
      }
      const std::span<const TokenId> target(result.sampled.data() + at,
                                            static_cast<std::size_t>(p.num_ids));
      at += static_cast<std::size_t>(p.num_ids);
      const int length = static_cast<int>(s.tokens.size());
      const Verification v = verify_greedy(s.draft, target, p.first_position, s.rule,
                                           s.rule.max_emit(s.generated, length));
      if (p.verifying) {
        run.stats.record(static_cast<int>(s.draft.size()), v.accepted,
                         static_cast<int>(v.emitted.size()));
      }
      auto& out = run.outputs[static_cast<std::size_t>(s.id)].tokens;
      out.insert(out.end(), v.emitted.begin(), v.emitted.end());
      s.tokens.insert(s.tokens.end(), v.emitted.begin(), v.emitted.end());
      s.generated += static_cast<int>(v.emitted.size());
      // Rejected drafts' slots stay in the table and are overwritten by the next step, which starts
      // at kv_valid (roll_back_table says which blocks could be given back instead).
      s.computed = v.kv_valid;
      if (v.finish != FinishReason::none) finish(s, v.finish);
    }
  }
  return run;
}

}  // namespace aisp::serving
