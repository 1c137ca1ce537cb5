#include "serving/disaggregated.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/base/error.hpp"

namespace aisp::serving {

namespace {

void check_pair(const ModelRunner& prefill, const ModelRunner& decode,
                const SchedulerConfig& prefill_config, const SchedulerConfig& decode_config) {
  // Blocks move whole, slot for slot, and the decode engine goes on from the prefill engine's
  // first token: the two sides must agree on the block and the vocabulary and on what ends a
  // sequence.
  if (prefill.block_size() != decode.block_size()) {
    throw UsageError(fmt::format("disaggregation: the prefill runner's KV blocks hold {} tokens, "
                                 "the decode runner's {}",
                                 prefill.block_size(), decode.block_size()));
  }
  if (prefill.vocab_size() != decode.vocab_size()) {
    throw UsageError(fmt::format("disaggregation: vocabularies differ ({} and {})",
                                 prefill.vocab_size(), decode.vocab_size()));
  }
  if (prefill_config.eos_token_id != decode_config.eos_token_id) {
    throw UsageError(fmt::format("disaggregation: eos_token_id differs ({} and {})",
                                 prefill_config.eos_token_id, decode_config.eos_token_id));
  }
  if (decode_config.policy != SchedulingPolicy::continuous ||
      decode_config.kv_mode != KvMode::paged) {
    throw UsageError(fmt::format(
        "disaggregation: the decode engine needs the continuous policy and paged KV (got {}, {})",
        policy_name(decode_config.policy), kv_mode_name(decode_config.kv_mode)));
  }
}

SchedulerConfig prefill_side(SchedulerConfig config) {
  config.hand_off_after_prefill = true;
  return config;
}

SchedulerConfig decode_side(SchedulerConfig config) {
  config.hand_off_after_prefill = false;
  return config;
}

}  // namespace

DevicePair parse_device_pair(std::string_view text) {
  const auto refuse = [text](std::string_view why) {
    return UsageError(fmt::format("--disaggregate '{}': {}", text, why));
  };
  const auto comma = text.find(',');
  if (comma == std::string_view::npos || text.find(',', comma + 1) != std::string_view::npos) {
    throw refuse("expected two device indices PREFILL,DECODE, e.g. 0,1");
  }
  // from_chars takes a leading '-' and stops at anything else: only a whole run of digits counts,
  // so "1x", " 1" and "-1" are refused rather than read as something the user did not write.
  const auto index = [&](std::string_view part) {
    int value = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || part.front() == '-' || ec != std::errc{} ||
        end != part.data() + part.size()) {
      throw refuse(fmt::format("'{}' is not a device index (expected PREFILL,DECODE, e.g. 0,1)",
                               part));
    }
    return value;
  };
  const DevicePair pair{index(text.substr(0, comma)), index(text.substr(comma + 1))};
  if (pair.prefill == pair.decode) {
    throw refuse("the prefill and decode engines need two different devices");
  }
  return pair;
}

DisaggregatedEngine::DisaggregatedEngine(ModelRunner& prefill_runner, ModelRunner& decode_runner,
                                         KvBlockMover& mover, SchedulerConfig prefill_config,
                                         SchedulerConfig decode_config, std::string model_name)
    : m_mover(mover), m_model_name(std::move(model_name)) {
  check_pair(prefill_runner, decode_runner, prefill_config, decode_config);
  m_prefill = std::make_unique<EngineLoop>(prefill_runner, prefill_side(prefill_config),
                                           m_model_name);
  m_decode = std::make_unique<EngineLoop>(decode_runner, decode_side(decode_config), m_model_name);
  m_prefill->set_hand_off_handler([this](HandOff h) { on_hand_off(std::move(h)); });
}

DisaggregatedEngine::~DisaggregatedEngine() {
  {
    // From here on a hand-off is answered with `cancelled` instead of reaching m_decode.
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  // Stopped, not destroyed, one after the other: the other engine's thread may still call into
  // either (a release, a cancel from a sink) until both threads are joined.
  m_decode->shutdown();
  m_prefill->shutdown();
}

ModelInfo DisaggregatedEngine::info() const {
  ModelInfo info = m_prefill->info();
  info.max_context = std::min(info.max_context, m_decode->info().max_context);
  return info;
}

SubmitResult DisaggregatedEngine::submit(GenerationRequest request, TokenSink sink) {
  SubmitResult result;
  // The decode engine must be able to hold the whole sequence too; the prefill engine checks its
  // own limits in its submit().
  result.message = m_decode->validate(request);
  if (!result.message.empty()) {
    result.status = SubmitStatus::invalid;
    return result;
  }
  const auto prompt_tokens = static_cast<std::int64_t>(request.prompt.size());
  std::lock_guard lock(m_mutex);
  if (m_draining || m_stopping) {
    ++m_requests_rejected;
    result.status = SubmitStatus::draining;
    result.message = "the engine is draining and accepts no new requests";
    return result;
  }
  auto r = std::make_shared<Request>();
  r->id = m_next_id;
  r->sink = std::move(sink);
  // Under m_mutex: a hand-off of this request (prefill thread) waits until it is in m_by_prefill.
  SubmitResult p = m_prefill->submit(std::move(request),
                                     [this, r](const TokenEvent& e) { on_event(r, e); });
  if (p.status != SubmitStatus::accepted) {
    if (p.status != SubmitStatus::invalid) ++m_requests_rejected;
    p.id = -1;
    return p;
  }
  ++m_next_id;
  r->prefill_id = p.id;
  m_requests.emplace(r->id, r);
  m_by_prefill.emplace(p.id, r);
  ++m_unfinished;
  ++m_requests_total;
  m_prompt_tokens += prompt_tokens;
  result.id = r->id;
  return result;
}

void DisaggregatedEngine::cancel(RequestId id) {
  std::lock_guard lock(m_mutex);
  auto it = m_requests.find(id);
  if (it == m_requests.end()) return;
  Request& r = *it->second;
  r.cancel_requested = true;
  // Decided under the same mutex as the hand-off: in the prefill phase the prefill engine cancels
  // it, or (if it handed it off meanwhile) on_hand_off sees cancel_requested and does not forward it.
  if (r.phase == Phase::prefill) {
    m_prefill->cancel(r.prefill_id);
  } else {
    m_decode->cancel(r.decode_id);
  }
}

void DisaggregatedEngine::on_event(const std::shared_ptr<Request>& request,
                                   const TokenEvent& event) {
  if (request->sink) {
    try {
      request->sink(event);
    } catch (const std::exception&) {
      // As EngineLoop: a throwing sink is the caller's bug, and must not lose the final count.
    }
  }
  if (!event.finished) return;
  bool idle = false;
  {
    std::lock_guard lock(m_mutex);
    m_requests.erase(request->id);
    m_by_prefill.erase(request->prefill_id);
    --m_unfinished;
    ++m_requests_finished;
    idle = m_unfinished == 0;
  }
  if (idle) m_idle.notify_all();
}

void DisaggregatedEngine::on_hand_off(HandOff handoff) {
  const RequestId prefill_id = handoff.id;
  std::shared_ptr<Request> r;
  TokenEvent final_event;
  final_event.finished = true;
  {
    std::lock_guard lock(m_mutex);
    auto it = m_by_prefill.find(prefill_id);
    if (it == m_by_prefill.end()) {
      // Not ours: nobody is waiting for it. Give the blocks back.
      m_prefill->release_handed_off(prefill_id);
      return;
    }
    r = it->second;
    m_by_prefill.erase(it);
    if (r->cancel_requested || m_stopping) {
      final_event.reason = FinishReason::cancelled;
    } else {
      PrefilledRequest p;
      p.request = std::move(handoff.request);
      p.first_token = handoff.first_token;
      p.copy_kv = [this, src = std::move(handoff.blocks)](std::span<const BlockId> dst) {
        if (dst.size() != src.size()) {
          throw std::logic_error(fmt::format("disaggregation: {} prompt blocks copied into {}",
                                             src.size(), dst.size()));
        }
        m_mover.move(src, dst);
      };
      p.release = [this, prefill_id] { m_prefill->release_handed_off(prefill_id); };
      const SubmitResult d =
          m_decode->submit_prefilled(std::move(p), [this, r](const TokenEvent& e) { on_event(r, e); });
      if (d.status == SubmitStatus::accepted) {
        r->phase = Phase::decode;
        r->decode_id = d.id;
        ++m_handoffs;
        m_handed_off.notify_all();
        return;
      }
      final_event.reason = FinishReason::error;
      final_event.error = "disaggregation: the decode engine refused the hand-off: " + d.message;
    }
  }
  // Not forwarded: the request ends here, and the prefill blocks are free again.
  m_prefill->release_handed_off(prefill_id);
  on_event(r, final_event);
}

EngineStats DisaggregatedEngine::stats() const {
  const EngineStats p = m_prefill->stats();
  const EngineStats d = m_decode->stats();
  EngineStats out;
  {
    std::lock_guard lock(m_mutex);
    out.requests_total = m_requests_total;
    out.requests_finished = m_requests_finished;
    out.requests_rejected = m_requests_rejected;
    out.prompt_tokens = m_prompt_tokens;
  }
  out.waiting = p.waiting + d.waiting;
  out.running = p.running + d.running;
  out.kv_blocks_used = p.kv_blocks_used + d.kv_blocks_used;
  out.kv_blocks_total = p.kv_blocks_total + d.kv_blocks_total;
  out.preemptions = p.preemptions + d.preemptions;
  out.steps = p.steps + d.steps;
  out.generated_tokens = p.generated_tokens + d.generated_tokens;
  out.prefix_cache = p.prefix_cache || d.prefix_cache;
  out.prefix_cache_queried_tokens = p.prefix_cache_queried_tokens + d.prefix_cache_queried_tokens;
  out.prefix_cache_hit_tokens = p.prefix_cache_hit_tokens + d.prefix_cache_hit_tokens;
  out.kv_blocks_cached = p.kv_blocks_cached + d.kv_blocks_cached;
  out.prefix_cache_evictions = p.prefix_cache_evictions + d.prefix_cache_evictions;
  out.speculative = d.speculative;
  out.spec_verifications = d.spec_verifications;
  out.spec_draft_tokens = d.spec_draft_tokens;
  out.spec_accepted_tokens = d.spec_accepted_tokens;
  out.spec_emitted_tokens = d.spec_emitted_tokens;
  out.step_timing = true;
  out.runner_time = p.runner_time + d.runner_time;
  out.busy_time = p.busy_time + d.busy_time;
  return out;
}

void DisaggregatedEngine::drain() {
  {
    std::unique_lock lock(m_mutex);
    m_draining = true;
    m_idle.wait(lock, [this] { return m_unfinished == 0; });
  }
  // Every request has its final event, so every release is queued: the prefill engine's drain()
  // returns once they are done, and stats() then shows every block free on both sides.
  m_prefill->drain();
  m_decode->drain();
}

void DisaggregatedEngine::wait_idle() {
  {
    std::unique_lock lock(m_mutex);
    m_idle.wait(lock, [this] { return m_unfinished == 0; });
  }
  m_prefill->wait_idle();
  m_decode->wait_idle();
}

std::int64_t DisaggregatedEngine::handoffs() const {
  std::lock_guard lock(m_mutex);
  return m_handoffs;
}

void DisaggregatedEngine::wait_for_handoffs(std::int64_t count) {
  std::unique_lock lock(m_mutex);
  m_handed_off.wait(lock, [&] { return m_handoffs >= count; });
}

}  // namespace aisp::serving
