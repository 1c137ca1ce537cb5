// EngineLoop: the Engine (engine_api.hpp) over a ModelRunner and a Scheduler. One engine thread
// does everything that touches the scheduler or the runner: it takes new submissions and cancels
// from thread-safe queues, schedules a step, runs it, delivers the tokens to the sinks, and sleeps
// on a condition variable when there is nothing to do. submit(), cancel(), stats() and drain() may
// be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serving/engine_api.hpp"
#include "serving/runner_api.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving {

// One engine step, for metrics (the server's step-time histogram).
struct StepStats {
  std::int64_t step = 0;  // 0-based index
  std::chrono::steady_clock::time_point start;
  std::chrono::nanoseconds duration{0};  // runner.step() alone
  int tokens = 0;                        // tokens computed (padding included)
  StepComposition composition;
  bool failed = false;                   // the runner threw
};

using StepObserver = std::function<void(const StepStats&)>;

class EngineLoop final : public Engine {
 public:
  // Sizes left at 0 in `config` (num_kv_blocks, max_batched_tokens, max_context) and vocab_size
  // come from the runner; a size above the runner's is a UsageError. config.block_size must equal
  // the runner's (the runner refuses every step otherwise). `model_name` is what info() reports.
  EngineLoop(ModelRunner& runner, SchedulerConfig config, std::string model_name = "aisp");
  ~EngineLoop() override;  // cancels what is left (sinks see `cancelled`) and joins the thread
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  [[nodiscard]] ModelInfo info() const override;
  SubmitResult submit(GenerationRequest request, TokenSink sink) override;
  void cancel(RequestId id) override;
  [[nodiscard]] EngineStats stats() const override;
  void drain() override;

  // Called on the engine thread after every step; keep it short. Replaces any earlier observer.
  void set_step_observer(StepObserver observer);
  // The last (up to) kStepHistory steps, oldest first.
  [[nodiscard]] std::vector<StepStats> recent_steps() const;
  [[nodiscard]] const SchedulerConfig& config() const { return m_config; }

  static constexpr std::size_t kStepHistory = 1024;

 private:
  struct Submission {
    RequestId id;
    GenerationRequest request;
    TokenSink sink;
  };

  using Clock = std::chrono::steady_clock;
  // An iteration that ran a step: when its busy window opened, and its runner's time.
  struct IterationTiming {
    Clock::time_point start;
    std::chrono::nanoseconds runner{0};
  };

  void run();
  // Hands events to their sinks. The delivery that ends an iteration which ran a step passes its
  // timing, which it closes and publishes once the sinks are done (engine_loop.cpp, run()).
  void deliver(std::vector<SequenceEvent> events, const IterationTiming* ending = nullptr);
  void publish(const IterationTiming& timing);
  void refresh_snapshot_locked();

  ModelRunner& m_runner;
  SchedulerConfig m_config;
  std::string m_model_name;
  // Engine thread only, but for validate() (reads the immutable config) from submit().
  Scheduler m_scheduler;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;  // the engine thread: new work or stop
  std::condition_variable m_idle;  // drain(): the last request finished
  std::deque<Submission> m_incoming;
  std::vector<RequestId> m_cancels;
  bool m_stop = false;
  bool m_draining = false;
  RequestId m_next_id = 1;
  std::int64_t m_unfinished = 0;   // accepted and not yet given their final event
  EngineStats m_stats;             // snapshot; waiting/running/blocks refreshed each iteration
  int m_waiting_new_snapshot = 0;  // the scheduler's never-admitted count, for queue_full
  std::deque<StepStats> m_steps;
  StepObserver m_observer;
  // EngineStats::runner_time and busy_time in ns, both published when an iteration ends (so that a
  // reader never sees a step's runner time without its busy time). Atomics rather than m_mutex: an
  // iteration often ends without taking the lock (no request finished); no lock is added for them.
  std::atomic<std::int64_t> m_runner_ns{0};
  std::atomic<std::int64_t> m_busy_ns{0};

  // Engine thread only.
  std::unordered_map<RequestId, TokenSink> m_sinks;

  std::thread m_thread;  // last: starts after everything above is built
};

}  // namespace aisp::serving
