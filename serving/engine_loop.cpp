#include "serving/engine_loop.hpp"

#include <fmt/format.h>

#include <exception>
#include <utility>

#include "core/base/error.hpp"

namespace aisp::serving {

namespace {

// Fills the sizes the caller left at 0 from the runner and refuses sizes the runner cannot take.
SchedulerConfig resolve(SchedulerConfig config, const ModelRunner& runner) {
  auto fill = [](int& value, int runner_value, const char* name) {
    if (value == 0) {
      value = runner_value;
    } else if (value > runner_value) {
      throw UsageError(
          fmt::format("engine: {} = {} exceeds the runner's {}", name, value, runner_value));
    }
  };
  if (config.block_size != runner.block_size()) {
    throw UsageError(fmt::format("engine: block_size {} differs from the runner's KV block size {}",
                                 config.block_size, runner.block_size()));
  }
  fill(config.num_kv_blocks, runner.num_kv_blocks(), "num_kv_blocks");
  fill(config.max_batched_tokens, runner.max_batched_tokens(), "max_batched_tokens");
  fill(config.max_context, runner.max_context(), "max_context");
  fill(config.vocab_size, runner.vocab_size(), "vocab_size");
  return config;
}

}  // namespace

EngineLoop::EngineLoop(ModelRunner& runner, SchedulerConfig config, std::string model_name)
    : m_runner(runner),
      m_config(resolve(config, runner)),
      m_model_name(std::move(model_name)),
      m_scheduler(m_config) {
  m_stats.kv_blocks_total = m_config.num_kv_blocks;
  m_stats.step_timing = true;
  // Before the first request too: /metrics shows the speculative counters at 0, not absent.
  m_stats.speculative = m_scheduler.speculative();
  m_thread = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(); }

void EngineLoop::shutdown() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

ModelInfo EngineLoop::info() const {
  ModelInfo info;
  info.name = m_model_name;
  info.vocab_size = m_config.vocab_size;
  info.max_context = m_config.max_context;
  info.eos_token_id = m_config.eos_token_id;
  return info;
}

SubmitResult EngineLoop::submit(GenerationRequest request, TokenSink sink) {
  SubmitResult result;
  // validate() reads only the scheduler's config, which never changes: safe from any thread.
  result.message = m_scheduler.validate(request);
  if (!result.message.empty()) {
    result.status = SubmitStatus::invalid;
    return result;
  }
  {
    std::lock_guard lock(m_mutex);
    if (m_draining || m_stop) {
      ++m_stats.requests_rejected;
      result.status = SubmitStatus::draining;
      result.message = "the engine is draining and accepts no new requests";
      return result;
    }
    // The snapshot never undercounts the scheduler's queue (it only shrinks between refreshes), so
    // a request accepted here is never refused when the engine thread hands it over.
    if (m_waiting_new_snapshot + static_cast<long long>(m_incoming.size()) >=
        m_config.max_waiting) {
      ++m_stats.requests_rejected;
      result.status = SubmitStatus::queue_full;
      result.message =
          fmt::format("too many requests waiting (max_waiting = {})", m_config.max_waiting);
      return result;
    }
    result.id = m_next_id++;
    ++m_unfinished;
    ++m_stats.requests_total;
    m_stats.prompt_tokens += static_cast<std::int64_t>(request.prompt.size());
    m_incoming.push_back({result.id, std::move(request), std::move(sink)});
  }
  m_wake.notify_one();
  return result;
}

std::string EngineLoop::validate(const GenerationRequest& request) const {
  return m_scheduler.validate(request);  // reads only the immutable config
}

SubmitResult EngineLoop::submit_prefilled(PrefilledRequest request, TokenSink sink) {
  SubmitResult result;
  result.message = m_scheduler.validate(request.request);
  if (result.message.empty() && (!request.copy_kv || !request.release))
    result.message = "a prefilled request needs both copy_kv and release";
  if (!result.message.empty()) {
    result.status = SubmitStatus::invalid;
    return result;
  }
  {
    std::lock_guard lock(m_mutex);
    if (m_draining || m_stop) {
      ++m_stats.requests_rejected;
      result.status = SubmitStatus::draining;
      result.message = "the engine is draining and accepts no new requests";
      return result;
    }
    result.id = m_next_id++;
    ++m_unfinished;
    ++m_stats.requests_total;
    m_incoming_prefilled.push_back({result.id, std::move(request), std::move(sink)});
  }
  m_wake.notify_one();
  return result;
}

void EngineLoop::set_hand_off_handler(HandOffHandler handler) {
  std::lock_guard lock(m_mutex);
  m_hand_off = std::move(handler);
}

void EngineLoop::release_handed_off(RequestId id) {
  {
    std::lock_guard lock(m_mutex);
    m_releases.push_back(id);
  }
  m_wake.notify_one();
}

void EngineLoop::wait_idle() {
  std::unique_lock lock(m_mutex);
  m_idle.wait(lock, [this] { return m_unfinished == 0; });
}

void EngineLoop::cancel(RequestId id) {
  {
    std::lock_guard lock(m_mutex);
    m_cancels.push_back(id);
  }
  m_wake.notify_one();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard lock(m_mutex);
  EngineStats out = m_stats;
  out.waiting += static_cast<int>(m_incoming.size() + m_incoming_prefilled.size());
  // Runner first: publish() adds busy before runner (release), so runner <= busy in every read.
  out.runner_time = std::chrono::nanoseconds(m_runner_ns.load(std::memory_order_acquire));
  out.busy_time = std::chrono::nanoseconds(m_busy_ns.load(std::memory_order_relaxed));
  return out;
}

void EngineLoop::drain() {
  std::unique_lock lock(m_mutex);
  m_draining = true;
  m_idle.wait(lock, [this] { return m_unfinished == 0; });
}

void EngineLoop::set_step_observer(StepObserver observer) {
  std::lock_guard lock(m_mutex);
  m_observer = std::move(observer);
}

std::vector<StepStats> EngineLoop::recent_steps() const {
  std::lock_guard lock(m_mutex);
  return {m_steps.begin(), m_steps.end()};
}

void EngineLoop::refresh_snapshot_locked() {
  m_stats.waiting = m_scheduler.num_waiting() + m_scheduler.num_prefilled_waiting();
  m_stats.running = m_scheduler.num_running();
  m_stats.kv_blocks_used = m_scheduler.blocks().num_used();
  m_stats.preemptions = m_scheduler.preemptions();
  m_stats.generated_tokens = m_scheduler.generated_tokens();
  const PrefixCacheStats pc = m_scheduler.prefix_cache_stats();
  m_stats.prefix_cache = pc.enabled;
  m_stats.prefix_cache_queried_tokens = pc.queried_tokens;
  m_stats.prefix_cache_hit_tokens = pc.hit_tokens;
  m_stats.kv_blocks_cached = pc.cached_blocks;
  m_stats.prefix_cache_evictions = pc.evictions;
  const AcceptanceStats& spec = m_scheduler.acceptance_stats();
  m_stats.speculative = m_scheduler.speculative();
  m_stats.spec_verifications = spec.verifications();
  m_stats.spec_draft_tokens = spec.proposed();
  m_stats.spec_accepted_tokens = spec.accepted();
  m_stats.spec_emitted_tokens = spec.emitted();
  m_waiting_new_snapshot = m_scheduler.num_waiting_new();
}

void EngineLoop::publish(const IterationTiming& timing) {
  m_busy_ns.fetch_add((Clock::now() - timing.start).count(), std::memory_order_relaxed);
  m_runner_ns.fetch_add(timing.runner.count(), std::memory_order_release);
}

void EngineLoop::release_kv_source(RequestId id) {
  auto it = m_kv_sources.find(id);
  if (it == m_kv_sources.end()) return;
  const std::function<void()> release = std::move(it->second.release);
  m_kv_sources.erase(it);
  try {
    release();
  } catch (const std::exception&) {
    // The prefill engine's side of the bargain; its failure must not take this engine down.
  }
}

void EngineLoop::admit_prefilled() {
  if (m_scheduler.num_prefilled_waiting() == 0) return;
  for (const PrefilledAdmission& a : m_scheduler.admit_prefilled()) {
    auto it = m_kv_sources.find(a.id);
    if (it == m_kv_sources.end()) {
      m_scheduler.fail(a.id, "engine: a prefilled sequence has no K/V source");
      continue;
    }
    const std::function<void(std::span<const BlockId>)> copy_kv = std::move(it->second.copy_kv);
    std::string failure;
    try {
      copy_kv(a.blocks);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "non-standard exception";
    }
    // Copied or not, the source is of no more use: the prefill engine may reuse its blocks.
    release_kv_source(a.id);
    if (!failure.empty()) m_scheduler.fail(a.id, "K/V transfer failed: " + failure);
  }
  deliver(m_scheduler.take_events());  // failed copies, sequences too big for this pool
}

void EngineLoop::pass_on(std::vector<HandOff> handoffs) {
  HandOffHandler handler;
  {
    std::lock_guard lock(m_mutex);
    handler = m_hand_off;
  }
  std::vector<SequenceEvent> failed;
  for (HandOff& h : handoffs) {
    const RequestId id = h.id;
    std::string failure;
    if (!handler) {
      failure = "engine: a sequence was handed off after prefill, but no hand-off handler is set";
    } else {
      try {
        handler(std::move(h));
      } catch (const std::exception& e) {
        failure = fmt::format("engine: hand-off failed: {}", e.what());
      } catch (...) {
        failure = "engine: hand-off failed: non-standard exception";
      }
    }
    if (failure.empty()) {
      m_sinks.erase(id);  // the handler owns the request; m_unfinished drops at the release
      continue;
    }
    // Nobody took it: it ends here, and its blocks are free at once.
    m_scheduler.release_handed_off(id);
    SequenceEvent e;
    e.id = id;
    e.event = {-1, true, FinishReason::error, std::move(failure)};
    failed.push_back(std::move(e));
  }
  deliver(std::move(failed));
}

void EngineLoop::deliver(std::vector<SequenceEvent> events, const IterationTiming* ending) {
  std::int64_t finished = 0;
  for (SequenceEvent& e : events) {
    if (e.event.finished) release_kv_source(e.id);  // a prefilled sequence that ended uncopied
    auto it = m_sinks.find(e.id);
    if (it == m_sinks.end()) continue;
    if (it->second) {
      // A throwing sink is the caller's bug; it must not take the engine (and every other request)
      // down.
      try {
        it->second(e.event);
      } catch (const std::exception&) {
      }
    }
    if (e.event.finished) {
      m_sinks.erase(it);
      ++finished;
    }
  }
  if (finished == 0) {
    if (ending != nullptr) publish(*ending);
    return;
  }
  bool idle = false;
  {
    std::lock_guard lock(m_mutex);
    m_unfinished -= finished;
    m_stats.requests_finished += finished;
    refresh_snapshot_locked();  // the blocks are already free: stats() after drain() must show it
    idle = m_unfinished == 0;
    // Before the lock is released: whoever drain() wakes sees this iteration's times too.
    if (ending != nullptr) publish(*ending);
  }
  if (idle) m_idle.notify_all();
}

// Busy time (EngineStats::busy_time) is the wall time of the iterations that ran a step, from the
// moment the iteration has work (the loop's top, or waking from the sleep below when there was none)
// to the moment the last of its tokens went to the sinks and its finished requests were counted.
// In: waiting for m_mutex (contended by submit()/stats() on the server's threads), taking the
// submissions and cancels, Scheduler::add/cancel/schedule/on_step_done, the snapshot refreshes, the
// runner's step, the step observer (the server's metrics) and the sinks (the server's per-request
// queues). Out: the sleep waiting for work, iterations that ran no step (a cancel or a submission
// with nothing schedulable: no step to charge them to), and the final unlock and notify of drain().
// Runner time is runner.step() alone, so busy - runner is the host work the serving path adds
// around the steps, whatever the runner does inside its own step (for the GPU runner: building the
// step's metadata, launching, waiting for the GPU) counting as the runner's. Both are published
// together when the iteration ends, after its last sink call: a client that just got its last token
// may read them microseconds before they hold that step (`aisp loadgen` re-reads until they settle).
void EngineLoop::run() {
  int empty_steps = 0;
  while (true) {
    std::deque<Submission> incoming;
    std::deque<PrefilledSubmission> incoming_prefilled;
    std::vector<RequestId> cancels;
    std::vector<RequestId> releases;
    std::vector<SequenceEvent> refused;
    bool stop = false;
    IterationTiming timing{Clock::now()};
    {
      std::unique_lock lock(m_mutex);
      const auto has_work = [this] {
        return m_stop || !m_incoming.empty() || !m_incoming_prefilled.empty() ||
               !m_cancels.empty() || !m_releases.empty() || m_scheduler.has_work();
      };
      if (!has_work()) {
        m_wake.wait(lock, has_work);
        timing.start = Clock::now();  // the sleep is idle time, not busy
      }
      incoming.swap(m_incoming);
      incoming_prefilled.swap(m_incoming_prefilled);
      cancels.swap(m_cancels);
      releases.swap(m_releases);
      stop = m_stop;
      for (Submission& s : incoming) {
        m_sinks[s.id] = std::move(s.sink);
        std::string why;
        if (m_scheduler.add(s.id, std::move(s.request), &why) != AddStatus::accepted) {
          // submit() checked both; reaching here is an engine bug, reported to the client, not
          // hidden.
          SequenceEvent e;
          e.id = s.id;
          e.event = {-1, true, FinishReason::error,
                     "engine: request refused after acceptance: " + why};
          refused.push_back(std::move(e));
        }
      }
      for (PrefilledSubmission& s : incoming_prefilled) {
        m_sinks[s.id] = std::move(s.sink);
        m_kv_sources[s.id] = {std::move(s.request.copy_kv), std::move(s.request.release)};
        std::string why;
        if (m_scheduler.add_prefilled(s.id, std::move(s.request.request), s.request.first_token,
                                      &why) != AddStatus::accepted) {
          SequenceEvent e;  // delivering it releases the source too
          e.id = s.id;
          e.event = {-1, true, FinishReason::error, "engine: prefilled sequence refused: " + why};
          refused.push_back(std::move(e));
        }
      }
      refresh_snapshot_locked();
    }
    deliver(std::move(refused));
    if (stop) {
      m_scheduler.cancel_all();
      deliver(m_scheduler.take_events());
      return;
    }
    for (RequestId id : cancels) m_scheduler.cancel(id);
    deliver(m_scheduler.take_events());
    if (!releases.empty()) {
      std::int64_t released = 0;
      for (RequestId id : releases) released += m_scheduler.release_handed_off(id) ? 1 : 0;
      bool idle = false;
      {
        std::lock_guard lock(m_mutex);
        m_unfinished -= released;
        refresh_snapshot_locked();
        idle = m_unfinished == 0;
      }
      if (idle) m_idle.notify_all();
    }
    admit_prefilled();
    if (!m_scheduler.has_work()) {
      std::lock_guard lock(m_mutex);
      refresh_snapshot_locked();
      continue;
    }

    StepBatch batch = m_scheduler.schedule();
    deliver(m_scheduler
                .take_events());  // errors found while scheduling (a sequence too big for the pool)
    {
      // Admissions just shrank the queue: submit() may count on the room while the step runs.
      std::unique_lock lock(m_mutex);
      refresh_snapshot_locked();
      if (batch.sequences.empty()) {
        // Legitimate once, after a step whose every sequence was preempted: the next schedule()
        // readmits. Twice in a row, the head of the queue waits for blocks that handed-off
        // sequences hold (disaggregation, prefill side): only a release (or a cancel) frees them.
        // Otherwise it would be a scheduler bug; a short wait keeps it from spinning a core.
        if (++empty_steps > 1) {
          if (m_scheduler.num_handed_off() > 0) {
            m_wake.wait(lock, [this] {
              return m_stop || !m_releases.empty() || !m_cancels.empty() || !m_incoming.empty() ||
                     !m_incoming_prefilled.empty();
            });
          } else {
            m_wake.wait_for(lock, std::chrono::milliseconds(1));
          }
        }
        continue;
      }
    }
    empty_steps = 0;

    StepStats st;
    st.composition = m_scheduler.last_composition();
    st.tokens = batch.token_count();
    st.start = std::chrono::steady_clock::now();
    StepResult result;
    std::string failure;
    try {
      result = m_runner.step(batch);
    } catch (const std::exception& e) {
      failure = e.what();
      st.failed = true;
    } catch (...) {
      failure = "runner threw a non-standard exception";
      st.failed = true;
    }
    st.duration = std::chrono::steady_clock::now() - st.start;
    timing.runner = st.duration;
    if (st.failed) {
      m_scheduler.on_step_failed(failure);
    } else {
      m_scheduler.on_step_done(result);
    }
    // The step is recorded before its tokens go out, so that whoever saw the last token (drain()
    // returning) also sees the step that made it.
    StepObserver observer;
    {
      std::lock_guard lock(m_mutex);
      st.step = m_stats.steps++;
      m_steps.push_back(st);
      if (m_steps.size() > kStepHistory) m_steps.pop_front();
      refresh_snapshot_locked();
      observer = m_observer;
    }
    if (observer) observer(st);
    deliver(m_scheduler.take_events(), &timing);
    // After their first tokens reached the sinks: the handler may start the decode engine on them.
    // (Outside the busy time, which ends with the step's last token: a hand-off is no token.)
    if (std::vector<HandOff> handoffs = m_scheduler.take_handoffs(); !handoffs.empty())
      pass_on(std::move(handoffs));
  }
}

}  // namespace aisp::serving
