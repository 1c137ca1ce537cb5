#include "serving/testing_engine.hpp"

#include <algorithm>
#include <utility>

namespace aisp::serving {

TokenId fake_token(const std::vector<TokenId> &prompt, int k, int vocab_size) {
  const std::int64_t last = prompt.empty() ? 0 : prompt.back();
  return static_cast<TokenId>((last + 1 + k) % vocab_size);
}

FakeEngine::FakeEngine(FakeEngineOptions options) : m_options(std::move(options)) {
  m_stats.kv_blocks_total = m_options.kv_blocks_total;
  m_thread = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() {
  {
    const std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

ModelInfo FakeEngine::info() const {
  return ModelInfo{.name = m_options.model_name,
                   .vocab_size = m_options.vocab_size,
                   .max_context = m_options.max_context,
                   .eos_token_id = m_options.eos_token_id};
}

SubmitResult FakeEngine::submit(GenerationRequest request, TokenSink sink) {
  const std::lock_guard lock(m_mutex);
  if (m_draining) {
    ++m_stats.requests_rejected;
    return {SubmitStatus::draining, -1, "the engine is draining"};
  }
  if (static_cast<int>(m_waiting.size()) >= m_options.max_waiting) {
    ++m_stats.requests_rejected;
    return {SubmitStatus::queue_full, -1,
            "the engine's queue is full (" + std::to_string(m_options.max_waiting) + " waiting)"};
  }
  if (request.prompt.empty() || request.max_tokens <= 0 ||
      static_cast<int>(request.prompt.size()) + request.max_tokens > m_options.max_context)
    return {SubmitStatus::invalid, -1, "prompt or max_tokens out of the engine's limits"};
  const RequestId id = m_next_id++;
  ++m_stats.requests_total;
  m_stats.prompt_tokens += static_cast<std::int64_t>(request.prompt.size());
  m_waiting.push_back(Sequence{id, std::move(request), std::move(sink), 0});
  m_stats.waiting = static_cast<int>(m_waiting.size());
  return {SubmitStatus::accepted, id, ""};
}

void FakeEngine::cancel(RequestId id) {
  {
    const std::lock_guard lock(m_mutex);
    m_cancel_calls.push_back(id);
    m_to_cancel.insert(id);
  }
  m_cv.notify_all();
}

EngineStats FakeEngine::stats() const {
  const std::lock_guard lock(m_mutex);
  return m_stats;
}

void FakeEngine::drain() {
  std::unique_lock lock(m_mutex);
  m_draining = true;
  m_cv.wait(lock,
            [&] { return (m_waiting.empty() && m_running.empty() && !m_delivering) || m_stop; });
}

void FakeEngine::set_paused(bool paused) {
  {
    const std::lock_guard lock(m_mutex);
    m_paused = paused;
  }
  m_cv.notify_all();
}

std::vector<RequestId> FakeEngine::cancel_calls() const {
  const std::lock_guard lock(m_mutex);
  return m_cancel_calls;
}

bool FakeEngine::wait_for_cancel(RequestId id, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(m_mutex);
  return m_cv.wait_for(lock, timeout, [&] {
    return std::find(m_cancel_calls.begin(), m_cancel_calls.end(), id) != m_cancel_calls.end();
  });
}

void FakeEngine::loop() {
  using Clock = std::chrono::steady_clock;
  auto next_step = Clock::now() + m_options.token_delay;
  for (;;) {
    // Sinks run outside the lock (a sink may take the server's locks); one step's events are
    // collected first and delivered in order.
    std::vector<std::pair<TokenSink, TokenEvent>> events;
    {
      std::unique_lock lock(m_mutex);
      m_cv.wait_until(lock, next_step, [&] { return m_stop; });
      if (m_stop)
        return;
      next_step = std::max(next_step + m_options.token_delay, Clock::now());
      if (m_paused)
        continue;
      const auto cancelled = [&](const Sequence &s) {
        if (!m_to_cancel.count(s.id))
          return false;
        events.emplace_back(s.sink, TokenEvent{-1, true, FinishReason::cancelled, ""});
        return true;
      };
      m_stats.requests_finished += static_cast<std::int64_t>(std::erase_if(m_waiting, cancelled));
      m_stats.requests_finished += static_cast<std::int64_t>(std::erase_if(m_running, cancelled));
      m_to_cancel.clear();
      while (!m_waiting.empty() && static_cast<int>(m_running.size()) < m_options.max_running) {
        m_running.push_back(std::move(m_waiting.front()));
        m_waiting.pop_front();
      }
      int blocks = 0;
      for (auto &s : m_running) {
        const auto &r = s.request;
        if (m_options.error_after_tokens >= 0 && s.generated >= m_options.error_after_tokens) {
          events.emplace_back(s.sink,
                              TokenEvent{-1, true, FinishReason::error, "fake engine failure"});
          s.generated = -1; // marks it finished
          continue;
        }
        const TokenId t = fake_token(r.prompt, s.generated, m_options.vocab_size);
        ++s.generated;
        ++m_stats.generated_tokens;
        FinishReason reason = FinishReason::none;
        if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), t) !=
                r.stop_token_ids.end() ||
            (!r.ignore_eos && t == m_options.eos_token_id))
          reason = FinishReason::stop;
        else if (s.generated >= r.max_tokens)
          reason = FinishReason::length;
        const bool done = reason != FinishReason::none;
        if (done && m_options.separate_final_event) {
          events.emplace_back(s.sink, TokenEvent{t, false, FinishReason::none, ""});
          events.emplace_back(s.sink, TokenEvent{-1, true, reason, ""});
        } else {
          events.emplace_back(s.sink, TokenEvent{t, done, reason, ""});
        }
        if (done)
          s.generated = -1;
        else
          blocks += (static_cast<int>(r.prompt.size()) + s.generated + m_options.block_size - 1) /
                    m_options.block_size;
      }
      const auto before = m_running.size();
      std::erase_if(m_running, [](const Sequence &s) { return s.generated < 0; });
      m_stats.requests_finished += static_cast<std::int64_t>(before - m_running.size());
      ++m_stats.steps;
      m_stats.waiting = static_cast<int>(m_waiting.size());
      m_stats.running = static_cast<int>(m_running.size());
      m_stats.kv_blocks_used = blocks;
      m_delivering = !events.empty();
    }
    for (auto &[sink, event] : events)
      sink(event);
    // Drain waiters are told only after the last events went out: drained means every sink saw the
    // end.
    {
      const std::lock_guard lock(m_mutex);
      m_delivering = false;
    }
    m_cv.notify_all();
  }
}

} // namespace aisp::serving
