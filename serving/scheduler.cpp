#include "serving/scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/base/error.hpp"
#include "serving/scheduler_internal.hpp"

namespace aisp::serving {

const char* policy_name(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::continuous ? "continuous" : "static";
}

const char* kv_mode_name(KvMode mode) { return mode == KvMode::paged ? "paged" : "reserved"; }

SchedulingPolicy parse_policy(std::string_view name) {
  if (name == "continuous") return SchedulingPolicy::continuous;
  if (name == "static") return SchedulingPolicy::static_batch;
  throw UsageError(fmt::format("unknown scheduling policy '{}' (continuous, static)", name));
}

KvMode parse_kv_mode(std::string_view name) {
  if (name == "paged") return KvMode::paged;
  if (name == "reserved") return KvMode::reserved;
  throw UsageError(fmt::format("unknown KV mode '{}' (paged, reserved)", name));
}

namespace {

SchedulerConfig checked(SchedulerConfig config) {
  auto positive = [](int value, const char* name) {
    if (value <= 0)
      throw UsageError(fmt::format("scheduler: {} must be positive, got {}", name, value));
  };
  positive(config.max_running, "max_running");
  positive(config.max_batched_tokens, "max_batched_tokens");
  positive(config.num_kv_blocks, "num_kv_blocks");
  positive(config.block_size, "block_size");
  positive(config.max_context, "max_context");
  if (config.max_waiting < 0) throw UsageError("scheduler: max_waiting must not be negative");
  if (config.vocab_size < 0) throw UsageError("scheduler: vocab_size must not be negative");
  // Static padding rewrites a member's last cached position, which may sit in a block shared
  // through the cache; reserved KV takes every block at admission. Neither is worth the cases.
  if (config.prefix_cache && (config.policy != SchedulingPolicy::continuous ||
                              config.kv_mode != KvMode::paged)) {
    throw UsageError(fmt::format(
        "scheduler: prefix caching needs the continuous policy and paged KV (got {} and {})",
        policy_name(config.policy), kv_mode_name(config.kv_mode)));
  }
  // Drafts ride on decodes, which the static policy pads and reserved KV does not grow: speculation
  // there would only be more cases for no use.
  if (config.drafter != nullptr) {
    if (config.policy != SchedulingPolicy::continuous || config.kv_mode != KvMode::paged) {
      throw UsageError(
          fmt::format("scheduler: speculative decoding needs the continuous policy and paged KV "
                      "(got {} and {})",
                      policy_name(config.policy), kv_mode_name(config.kv_mode)));
    }
    positive(config.num_draft, "num_draft");
  }
  // A hand-off happens at a sequence's first sampled token; a static batch's padding, a reservation
  // of the whole context or drafts for decodes that never happen here would all be beside the point.
  if (config.hand_off_after_prefill &&
      (config.policy != SchedulingPolicy::continuous || config.kv_mode != KvMode::paged ||
       config.drafter != nullptr)) {
    throw UsageError(fmt::format(
        "scheduler: handing off after prefill needs the continuous policy, paged KV and no drafter "
        "(got {}, {}{})",
        policy_name(config.policy), kv_mode_name(config.kv_mode),
        config.drafter != nullptr ? ", a drafter" : ""));
  }
  return config;
}

// The tokens a sequence must hold to sample its next token, against the whole pool: past it no
// amount of waiting or preempting helps, and the sequence ends with an error instead of looping.
std::string too_big(const BlockManager& blocks, int tokens) {
  const int needed = blocks.blocks_for_tokens(tokens);
  if (needed <= blocks.num_blocks()) return {};
  return fmt::format("sequence needs {} KV blocks for {} tokens; the pool has {}", needed, tokens,
                     blocks.num_blocks());
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config)
    : m_config(checked(config)),
      m_blocks(m_config.num_kv_blocks, m_config.block_size, m_config.prefix_cache) {}

Scheduler::~Scheduler() = default;

std::string Scheduler::validate(const GenerationRequest& request) const {
  const auto prompt = static_cast<long long>(request.prompt.size());
  if (prompt == 0) return "prompt is empty";
  if (request.max_tokens <= 0)
    return fmt::format("max_tokens must be at least 1, got {}", request.max_tokens);
  if (prompt + request.max_tokens > m_config.max_context) {
    return fmt::format(
        "prompt ({} tokens) + max_tokens ({}) exceeds the model's context of {} tokens", prompt,
        request.max_tokens, m_config.max_context);
  }
  if (m_config.vocab_size > 0) {
    for (std::size_t i = 0; i < request.prompt.size(); ++i) {
      const TokenId t = request.prompt[i];
      if (t < 0 || t >= m_config.vocab_size) {
        return fmt::format("prompt token {} (id {}) is outside the vocabulary [0, {})", i, t,
                           m_config.vocab_size);
      }
    }
  }
  return whole_prompt_refusal(m_config, request.prompt.size());
}

// Without chunking a prompt must fit one step whole; vLLM raises the budget to the longest prompt
// instead, but the runner's step size is a hard limit here, so such a prompt is refused up front.
std::string whole_prompt_refusal(const SchedulerConfig& config, std::size_t tokens) {
  if (config.chunked_prefill || tokens <= static_cast<std::size_t>(config.max_batched_tokens)) return {};
  return fmt::format("prompt of {} tokens exceeds max_batched_tokens ({}) and chunked prefill is off", tokens,
                     config.max_batched_tokens);
}

AddStatus Scheduler::add(SequenceId id, GenerationRequest request, std::string* message) {
  std::string why = validate(request);
  if (!why.empty()) {
    if (message) *message = std::move(why);
    return AddStatus::invalid;
  }
  if (m_waiting_new >= m_config.max_waiting) {
    if (message) *message = fmt::format("waiting queue full ({} requests)", m_config.max_waiting);
    return AddStatus::queue_full;
  }
  if (m_sequences.count(id) != 0)
    throw std::logic_error(fmt::format("scheduler: duplicate id {}", id));
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->prompt_len = static_cast<int>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->max_tokens = request.max_tokens;
  seq->stop_token_ids = std::move(request.stop_token_ids);
  seq->ignore_eos = request.ignore_eos;
  m_waiting.push_back(seq.get());
  m_sequences.emplace(id, std::move(seq));
  ++m_waiting_new;
  return AddStatus::accepted;
}

Scheduler::Sequence* Scheduler::find(SequenceId id) const {
  auto it = m_sequences.find(id);
  return it == m_sequences.end() ? nullptr : it->second.get();
}

int Scheduler::whole_context(const Sequence& seq) const {
  return std::min(seq.prompt_len + seq.max_tokens, m_config.max_context);
}

int Scheduler::chunk_for(const Sequence& seq, int budget) const {
  const int pending = seq.pending();
  if (budget <= 0 || pending <= 0) return 0;
  // A recomputation after preemption (prompt + generated) may exceed the whole budget: it is
  // chunked even with chunked prefill off, or it could never run again.
  if (m_config.chunked_prefill || pending > m_config.max_batched_tokens)
    return std::min(pending, budget);
  return pending <= budget ? pending : 0;
}

// ------------------------------------------------------------------------------------------------
// schedule()

StepBatch Scheduler::schedule() {
  if (m_in_flight) throw std::logic_error("scheduler: schedule() with a step still in flight");
  release_static_batch_if_done();
  m_composition = {};
  if (m_config.policy == SchedulingPolicy::static_batch && m_static_live == 0 &&
      m_running.empty()) {
    form_static_batch();
  }
  std::vector<Planned> plan;
  int budget = m_config.max_batched_tokens;
  bool preempted = false;
  if (m_config.drafter != nullptr) propose_drafts();
  schedule_decodes(plan, budget, preempted);
  schedule_padding(plan, budget);
  schedule_prefills(plan, budget, preempted);
  // Drafts only take what the decodes and prefills left, and never preempt: see schedule_drafts.
  if (m_config.drafter != nullptr) schedule_drafts(plan, budget);
  // As vLLM v1: a step that had to preempt admits nobody, or the newcomer would take the blocks
  // back.
  if (!preempted) admit_waiting(plan, budget);

  StepBatch batch;
  batch.block_size = m_config.block_size;
  m_flight.clear();
  for (const Planned& p : plan) {
    const Sequence& seq = *p.seq;
    ScheduledSequence s;
    s.id = seq.id;
    if (p.padding) {
      // A dummy decode that rewrites the last cached position with the token already there: same
      // K/V, no new block, and nothing sampled. The batch keeps its shape, as a static batch does.
      s.start_position = seq.computed - 1;
      s.tokens.assign(1, seq.tokens[static_cast<std::size_t>(s.start_position)]);
      m_composition.padding_tokens += 1;
    } else if (p.drafts > 0) {
      // A verification: the last token (no K/V yet) and the drafts after it, an argmax after each.
      s.start_position = seq.computed;
      s.tokens.push_back(seq.tokens.back());
      s.tokens.insert(s.tokens.end(), seq.draft.begin(), seq.draft.begin() + p.drafts);
      s.sample_all = true;
      m_composition.decode_tokens += p.num_tokens;
      m_composition.draft_tokens += p.drafts;
      m_composition.sampled += 1;
    } else {
      s.start_position = seq.computed;
      s.tokens.assign(seq.tokens.begin() + seq.computed,
                      seq.tokens.begin() + seq.computed + p.num_tokens);
      s.sample = seq.computed + p.num_tokens == seq.size();
      (seq.is_decode() ? m_composition.decode_tokens : m_composition.prefill_tokens) +=
          p.num_tokens;
      m_composition.sampled += s.sample ? 1 : 0;
    }
    const auto& table = m_blocks.block_table(seq.id);
    const int needed =
        m_blocks.blocks_for_tokens(s.start_position + static_cast<int>(s.tokens.size()));
    s.blocks.assign(table.begin(), table.begin() + needed);
    m_flight.push_back({seq.id, static_cast<int>(s.tokens.size()), p.padding, s.sample,
                        s.sample_all ? std::vector<TokenId>(s.tokens.begin() + 1, s.tokens.end())
                                     : std::vector<TokenId>{}});
    batch.sequences.push_back(std::move(s));
  }
  m_composition.sequences = static_cast<int>(batch.sequences.size());
  m_in_flight = !batch.sequences.empty();
  return batch;
}

void Scheduler::schedule_decodes(std::vector<Planned>& plan, int& budget, bool& preempted) {
  for (std::size_t i = 0; i < m_running.size() && budget > 0;) {
    Sequence& seq = *m_running[i];
    if (seq.padding || !seq.is_decode()) {
      ++i;
      continue;
    }
    if (!ensure_blocks(seq, seq.computed + 1, plan, budget, preempted))
      continue;  // seq left m_running
    plan.push_back({&seq, 1, false});
    budget -= 1;
    ++i;
  }
}

void Scheduler::schedule_padding(std::vector<Planned>& plan, int& budget) {
  for (Sequence* seq : m_running) {
    if (budget <= 0) return;
    if (!seq->padding || !m_blocks.has_sequence(seq->id) || seq->computed < 1) continue;
    plan.push_back({seq, 1, true});
    budget -= 1;
  }
}

void Scheduler::schedule_prefills(std::vector<Planned>& plan, int& budget, bool& preempted) {
  for (std::size_t i = 0; i < m_running.size() && budget > 0;) {
    Sequence& seq = *m_running[i];
    const int chunk = seq.padding || seq.is_decode() ? 0 : chunk_for(seq, budget);
    if (chunk == 0) {
      ++i;
      continue;
    }
    if (!ensure_blocks(seq, seq.computed + chunk, plan, budget, preempted)) continue;
    plan.push_back({&seq, chunk, false});
    budget -= chunk;
    ++i;
  }
}

void Scheduler::admit_waiting(std::vector<Planned>& plan, int& budget) {
  const bool static_policy = m_config.policy == SchedulingPolicy::static_batch;
  while (!m_waiting.empty() && budget > 0) {
    Sequence& seq = *m_waiting.front();
    // Static: between batch formations only preempted members of the current batch come back.
    if (static_policy && !seq.static_member) return;
    if (!static_policy && static_cast<int>(m_running.size()) >= m_config.max_running) return;
    const int need_tokens = m_config.kv_mode == KvMode::reserved ? whole_context(seq) : seq.size();
    if (std::string why = too_big(m_blocks, need_tokens); !why.empty()) {
      finish(seq, FinishReason::error, -1, why);
      continue;
    }
    match_cached_prefix(seq);
    const int chunk = chunk_for(seq, budget);
    if (chunk == 0) {
      unmatch(seq);
      return;  // FCFS: nobody overtakes the head
    }
    // A preempted static member may find the blocks held by padding: those give way.
    while (!admit_blocks(seq, seq.computed + chunk)) {
      if (!free_some_padding(plan, budget)) {
        unmatch(seq);
        return;
      }
    }
    if (m_config.prefix_cache) {
      m_prefix_queried += seq.size();
      m_prefix_hits += seq.computed;
    }
    m_waiting.pop_front();
    if (!seq.ever_admitted) --m_waiting_new;
    seq.ever_admitted = true;
    seq.running = true;
    seq.admitted_at = ++m_admissions;
    m_running.push_back(&seq);
    plan.push_back({&seq, chunk, false});
    budget -= chunk;
  }
}

// The last token is never taken from the cache (max_tokens = size - 1): the step must compute at
// least one position to produce the logits it samples from. When the whole prompt is cached this
// recomputes its last block (up to block_size tokens) into a private block, rather than only the
// last token into the shared cached block: that write would race with the other sequences reading
// the block in the same step, and a recomputed K/V need not be bit-identical to the cached one (a
// GEMM's rounding depends on the batch shape), so it would silently change a block others share.
// vLLM makes the same choice.
void Scheduler::match_cached_prefix(Sequence& seq) {
  if (!m_config.prefix_cache || seq.computed != 0 || m_blocks.has_sequence(seq.id)) return;
  seq.computed = m_blocks.match_prefix(seq.id, seq.tokens, seq.size() - 1);
}

void Scheduler::unmatch(Sequence& seq) {
  if (!m_config.prefix_cache || seq.running) return;
  // Its matched blocks become evictable again, as the most recently used: the head of the queue
  // will look them up again at the next step.
  m_blocks.free_sequence(seq.id);
  seq.computed = 0;
}

bool Scheduler::admit_blocks(Sequence& seq, int tokens) {
  if (m_config.kv_mode == KvMode::reserved) return m_blocks.reserve(seq.id, whole_context(seq));
  return m_blocks.grow_to(seq.id, tokens);
}

void Scheduler::form_static_batch() {
  while (!m_waiting.empty() && static_cast<int>(m_running.size()) < m_config.max_running) {
    Sequence& seq = *m_waiting.front();
    const int need_tokens = m_config.kv_mode == KvMode::reserved ? whole_context(seq) : seq.size();
    if (std::string why = too_big(m_blocks, need_tokens); !why.empty()) {
      finish(seq, FinishReason::error, -1, why);
      continue;
    }
    // Reserved: every member's whole context up front. Paged: blocks come as the prefills run.
    if (m_config.kv_mode == KvMode::reserved && !m_blocks.reserve(seq.id, whole_context(seq)))
      break;
    m_waiting.pop_front();
    --m_waiting_new;
    seq.ever_admitted = true;
    seq.running = true;
    seq.static_member = true;
    seq.admitted_at = ++m_admissions;
    m_running.push_back(&seq);
    ++m_static_live;
  }
}

bool Scheduler::ensure_blocks(Sequence& seq, int tokens, std::vector<Planned>& plan, int& budget,
                              bool& preempted) {
  const int missing =
      m_blocks.blocks_for_tokens(tokens) - static_cast<int>(m_blocks.block_table(seq.id).size());
  if (missing <= 0) return true;
  if (std::string why = too_big(m_blocks, seq.size()); !why.empty()) {
    finish(seq, FinishReason::error, -1, why);
    return false;
  }
  while (!m_blocks.can_allocate(missing)) {
    // Padding first: a finished static member's blocks are worth nothing to anyone.
    if (free_some_padding(plan, budget)) continue;
    // Then the most recently admitted live sequence holding blocks; when that is seq itself, it
    // yields.
    Sequence* victim = nullptr;
    for (auto it = m_running.rbegin(); it != m_running.rend(); ++it) {
      if (*it == &seq) break;
      if (!(*it)->padding && m_blocks.has_sequence((*it)->id)) {
        victim = *it;
        break;
      }
    }
    preempted = true;
    if (victim == nullptr) {
      preempt(seq, plan, budget);
      return false;
    }
    preempt(*victim, plan, budget);
  }
  if (!m_blocks.grow_to(seq.id, tokens))
    throw std::logic_error("scheduler: grow failed after check");
  return true;
}

void Scheduler::drop_from_plan(std::vector<Planned>& plan, const Sequence& seq, int& budget) {
  for (auto it = plan.begin(); it != plan.end();) {
    if (it->seq == &seq) {
      budget += it->num_tokens;
      it = plan.erase(it);
    } else {
      ++it;
    }
  }
}

void Scheduler::preempt(Sequence& seq, std::vector<Planned>& plan, int& budget) {
  drop_from_plan(plan, seq, budget);
  m_blocks.free_sequence(seq.id);
  remove_running(seq);
  seq.computed = 0;  // recomputation: prompt + generated tokens prefill again
  m_waiting.push_front(&seq);
  ++m_preemptions;
}

void Scheduler::free_padding(Sequence& seq, std::vector<Planned>& plan, int& budget) {
  drop_from_plan(plan, seq, budget);
  m_blocks.free_sequence(seq.id);
}

bool Scheduler::free_some_padding(std::vector<Planned>& plan, int& budget) {
  auto pad = std::find_if(m_running.begin(), m_running.end(), [&](const Sequence* s) {
    return s->padding && m_blocks.has_sequence(s->id);
  });
  if (pad == m_running.end()) return false;
  free_padding(**pad, plan, budget);
  return true;
}

void Scheduler::remove_running(Sequence& seq) {
  auto it = std::find(m_running.begin(), m_running.end(), &seq);
  if (it != m_running.end()) m_running.erase(it);
  seq.running = false;
}

// ------------------------------------------------------------------------------------------------
// After the step

void Scheduler::on_step_done(const StepResult& result) {
  if (!m_in_flight) throw std::logic_error("scheduler: on_step_done without a step in flight");
  std::size_t expected = 0;
  for (const FlightEntry& f : m_flight)
    expected += !f.draft.empty() ? static_cast<std::size_t>(f.num_tokens) : f.sample ? 1 : 0;
  if (result.sampled.size() != expected) {
    on_step_failed(fmt::format("runner returned {} tokens for {} sampled sequences",
                               result.sampled.size(), expected));
    return;
  }
  m_in_flight = false;
  std::size_t k = 0;
  for (const FlightEntry& f : m_flight) {
    if (!f.draft.empty()) {
      const std::span<const TokenId> target(result.sampled.data() + k,
                                            static_cast<std::size_t>(f.num_tokens));
      k += target.size();
      if (Sequence* seq = find(f.id)) verify_drafts(*seq, f.draft, target);
      continue;
    }
    const TokenId token = f.sample ? result.sampled[k++] : -1;
    Sequence* seq = find(f.id);
    if (seq == nullptr || f.padding || seq->padding) continue;
    seq->computed += f.num_tokens;
    // Before the sequence can finish and give its blocks back: they are indexed while it holds
    // them, and so stay cached (evictable) after it.
    if (m_config.prefix_cache) m_blocks.register_blocks(seq->id, seq->tokens, seq->computed);
    if (!f.sample) continue;
    if (token < 0 || (m_config.vocab_size > 0 && token >= m_config.vocab_size)) {
      finish(*seq, FinishReason::error, -1,
             fmt::format("runner sampled token id {} outside the vocabulary", token));
      continue;
    }
    append_token(*seq, token);
  }
  m_flight.clear();
  release_static_batch_if_done();
}

void Scheduler::on_step_failed(const std::string& message) {
  if (!m_in_flight) throw std::logic_error("scheduler: on_step_failed without a step in flight");
  m_in_flight = false;
  for (const FlightEntry& f : m_flight) {
    Sequence* seq = find(f.id);
    if (seq == nullptr || seq->padding) continue;
    finish(*seq, FinishReason::error, -1, message);
  }
  m_flight.clear();
  release_static_batch_if_done();
}

bool Scheduler::append_token(Sequence& seq, TokenId token) {
  seq.tokens.push_back(token);
  ++m_generated_tokens;
  const auto& stops = seq.stop_token_ids;
  FinishReason reason = FinishReason::none;
  if (std::find(stops.begin(), stops.end(), token) != stops.end() ||
      (!seq.ignore_eos && m_config.eos_token_id >= 0 && token == m_config.eos_token_id)) {
    reason = FinishReason::stop;
  } else if (seq.generated() >= seq.max_tokens || seq.size() >= m_config.max_context) {
    reason = FinishReason::length;
  }
  if (reason != FinishReason::none) {
    finish(seq, reason, token);
    return true;
  }
  SequenceEvent e;
  e.id = seq.id;
  e.event.token = token;
  m_events.push_back(std::move(e));
  if (m_config.hand_off_after_prefill) {
    hand_off(seq);
    return true;
  }
  return false;
}

// The sequence stops being scheduled here but keeps its blocks: it is out of m_running, so no
// preemption picks it as a victim, and its blocks' counts stay up, so nobody is handed them.
void Scheduler::hand_off(Sequence& seq) {
  HandOff h;
  h.id = seq.id;
  h.request.prompt.assign(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_len);
  h.request.max_tokens = seq.max_tokens;
  h.request.stop_token_ids = seq.stop_token_ids;
  h.request.ignore_eos = seq.ignore_eos;
  h.first_token = seq.tokens.back();
  // Exactly the prompt's positions: the first token's K/V is computed by the decode engine's first
  // step.
  const auto& table = m_blocks.block_table(seq.id);
  h.blocks.assign(table.begin(), table.begin() + m_blocks.blocks_for_tokens(seq.prompt_len));
  remove_running(seq);
  seq.handed_off = true;
  ++m_handed_off;
  m_handoffs.push_back(std::move(h));
}

std::vector<HandOff> Scheduler::take_handoffs() {
  std::vector<HandOff> out;
  out.swap(m_handoffs);
  return out;
}

bool Scheduler::release_handed_off(SequenceId id) {
  if (m_in_flight)
    throw std::logic_error("scheduler: release_handed_off() with a step in flight");
  Sequence* seq = find(id);
  if (seq == nullptr || !seq->handed_off) return false;
  m_blocks.free_sequence(id);
  --m_handed_off;
  m_sequences.erase(id);
  return true;
}

AddStatus Scheduler::add_prefilled(SequenceId id, GenerationRequest request, TokenId first_token,
                                   std::string* message) {
  std::string why = validate(request);
  if (why.empty() &&
      (m_config.policy != SchedulingPolicy::continuous || m_config.kv_mode != KvMode::paged)) {
    why = "prefilled sequences need the continuous policy and paged KV";
  }
  if (why.empty() &&
      (first_token < 0 || (m_config.vocab_size > 0 && first_token >= m_config.vocab_size))) {
    why = fmt::format("first token id {} is outside the vocabulary", first_token);
  }
  // The prefill engine finishes a sequence its first token ends (append_token's rules); one that
  // reached here anyway would decode a token too many.
  const auto& stops = request.stop_token_ids;
  if (why.empty() &&
      (request.max_tokens <= 1 ||
       static_cast<long long>(request.prompt.size()) + 1 >= m_config.max_context ||
       std::find(stops.begin(), stops.end(), first_token) != stops.end() ||
       (!request.ignore_eos && m_config.eos_token_id >= 0 && first_token == m_config.eos_token_id))) {
    why = "the first token already ends this sequence: nothing is left to decode";
  }
  if (!why.empty()) {
    if (message) *message = std::move(why);
    return AddStatus::invalid;
  }
  if (m_sequences.count(id) != 0)
    throw std::logic_error(fmt::format("scheduler: duplicate id {}", id));
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->prompt_len = static_cast<int>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->tokens.push_back(first_token);
  seq->max_tokens = request.max_tokens;
  seq->stop_token_ids = std::move(request.stop_token_ids);
  seq->ignore_eos = request.ignore_eos;
  seq->prefilled = true;
  seq->ever_admitted = true;  // never counted as a new waiting request (max_waiting)
  m_prefilled.push_back(seq.get());
  m_sequences.emplace(id, std::move(seq));
  return AddStatus::accepted;
}

std::vector<PrefilledAdmission> Scheduler::admit_prefilled() {
  if (m_in_flight) throw std::logic_error("scheduler: admit_prefilled() with a step in flight");
  std::vector<PrefilledAdmission> out;
  while (!m_prefilled.empty() && m_waiting.empty() &&
         static_cast<int>(m_running.size()) < m_config.max_running) {
    Sequence& seq = *m_prefilled.front();
    if (std::string why = too_big(m_blocks, seq.size()); !why.empty()) {
      finish(seq, FinishReason::error, -1, why);
      continue;
    }
    // The prompt and the first token's position: its first step here writes that one.
    if (!m_blocks.grow_to(seq.id, seq.size())) break;  // waits for blocks, in order
    m_prefilled.pop_front();
    seq.prefilled = false;
    seq.running = true;
    seq.computed = seq.prompt_len;
    seq.admitted_at = ++m_admissions;
    m_running.push_back(&seq);
    const auto& table = m_blocks.block_table(seq.id);
    out.push_back({seq.id, std::vector<BlockId>(table.begin(),
                                                table.begin() +
                                                    m_blocks.blocks_for_tokens(seq.prompt_len))});
  }
  return out;
}

bool Scheduler::fail(SequenceId id, std::string message) {
  if (m_in_flight) throw std::logic_error("scheduler: fail() with a step in flight");
  Sequence* seq = find(id);
  if (seq == nullptr || seq->padding || seq->handed_off) return false;
  finish(*seq, FinishReason::error, -1, std::move(message));
  return true;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, TokenId token, std::string error) {
  SequenceEvent e;
  e.id = seq.id;
  e.event.token = token;
  e.event.finished = true;
  e.event.reason = reason;
  e.event.error = std::move(error);
  m_events.push_back(std::move(e));
  // Preemption does not end a sequence: a draft model's cache of its tokens stays valid through it.
  if (m_config.drafter != nullptr) m_config.drafter->release(seq.id);

  if (seq.static_member) --m_static_live;
  const bool keep_as_padding = seq.static_member && seq.running && seq.computed >= 1 &&
                               (reason == FinishReason::length || reason == FinishReason::stop);
  if (keep_as_padding) {
    seq.padding = true;  // keeps its row and blocks until the whole batch has finished
    return;
  }
  m_blocks.free_sequence(seq.id);
  if (seq.running) {
    remove_running(seq);
  } else if (seq.prefilled) {
    auto it = std::find(m_prefilled.begin(), m_prefilled.end(), &seq);
    if (it != m_prefilled.end()) m_prefilled.erase(it);
  } else if (seq.handed_off) {
    --m_handed_off;
  } else {
    auto it = std::find(m_waiting.begin(), m_waiting.end(), &seq);
    if (it != m_waiting.end()) m_waiting.erase(it);
    if (!seq.ever_admitted) --m_waiting_new;
  }
  m_sequences.erase(seq.id);
}

void Scheduler::release_static_batch_if_done() {
  if (m_config.policy != SchedulingPolicy::static_batch || m_static_live > 0) return;
  for (Sequence* seq : m_running) {
    m_blocks.free_sequence(seq->id);
    m_sequences.erase(seq->id);
  }
  m_running.clear();
}

bool Scheduler::cancel(SequenceId id) {
  if (m_in_flight) throw std::logic_error("scheduler: cancel() with a step in flight");
  Sequence* seq = find(id);
  // A handed-off sequence belongs to the decode engine: it cancels it there and then releases it.
  if (seq == nullptr || seq->padding || seq->handed_off) return false;
  finish(*seq, FinishReason::cancelled, -1);
  release_static_batch_if_done();
  return true;
}

void Scheduler::cancel_all() {
  std::vector<SequenceId> ids;
  for (const auto& [id, seq] : m_sequences) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (SequenceId id : ids) {
    if (!release_handed_off(id)) cancel(id);  // shutdown: no copy of a handed-off one is coming
  }
}

std::vector<SequenceEvent> Scheduler::take_events() {
  std::vector<SequenceEvent> out;
  out.swap(m_events);
  return out;
}

PrefixCacheStats Scheduler::prefix_cache_stats() const {
  PrefixCacheStats out;
  out.enabled = m_config.prefix_cache;
  out.queried_tokens = m_prefix_queried;
  out.hit_tokens = m_prefix_hits;
  out.cached_blocks = m_blocks.num_cached();
  out.evictable_blocks = m_blocks.num_evictable();
  out.evictions = m_blocks.evictions();
  return out;
}

std::vector<TokenId> Scheduler::tokens_of(SequenceId id) const {
  const Sequence* seq = find(id);
  return seq ? seq->tokens : std::vector<TokenId>{};
}

int Scheduler::computed_of(SequenceId id) const {
  const Sequence* seq = find(id);
  return seq ? seq->computed : -1;
}

bool Scheduler::is_running(SequenceId id) const {
  const Sequence* seq = find(id);
  return seq != nullptr && seq->running;
}

}  // namespace aisp::serving
