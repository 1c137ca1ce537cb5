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
#include <span>
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

// Prefill/decode disaggregation (serving/disaggregated.hpp), the decode engine's side: a sequence
// whose prompt another engine computed, and which decodes here from its first token on.
struct PrefilledRequest {
  GenerationRequest request;  // as submitted to the prefill engine
  TokenId first_token = -1;   // sampled there, and already delivered to the client
  // Copies the prompt's K/V into this runner's blocks `dst` (positions [0, prompt size)), complete
  // when it returns; throws on failure (the sequence then ends with an error). Called at most once,
  // on this engine's thread, when the sequence is admitted.
  std::function<void(std::span<const BlockId> dst)> copy_kv;
  // Gives the prefill engine's blocks back. Called exactly once, on this engine's thread: after
  // copy_kv returned or threw, or when the sequence ends without being admitted (cancelled, too
  // big for this pool, shutdown).
  std::function<void()> release;
};

// The prefill engine's side: called on its thread for each sequence handed off
// (SchedulerConfig::hand_off_after_prefill), after its first token went to its sink. From then on
// that engine sends the sink nothing; the handler owns the request, and must see that
// EngineLoop::release_handed_off(id) is called once the blocks were copied or never will be.
using HandOffHandler = std::function<void(HandOff)>;

class EngineLoop final : public Engine {
 public:
  // Sizes left at 0 in `config` (num_kv_blocks, max_batched_tokens, max_context) and vocab_size
  // come from the runner; a size above the runner's is a UsageError. config.block_size must equal
  // the runner's (the runner refuses every step otherwise). `model_name` is what info() reports.
  EngineLoop(ModelRunner& runner, SchedulerConfig config, std::string model_name = "aisp");
  ~EngineLoop() override;  // shutdown()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  [[nodiscard]] ModelInfo info() const override;
  SubmitResult submit(GenerationRequest request, TokenSink sink) override;
  void cancel(RequestId id) override;
  [[nodiscard]] EngineStats stats() const override;
  void drain() override;
  // Cancels what is left (sinks see `cancelled`) and joins the engine thread; later submissions are
  // refused (draining) and cancels ignored. The destructor calls it; an owner whose callbacks reach
  // this object from other threads (DisaggregatedEngine) calls it first, while the object is still
  // whole. Not from two threads at once.
  void shutdown();

  // Called on the engine thread after every step; keep it short. Replaces any earlier observer.
  void set_step_observer(StepObserver observer);

  // --- prefill/decode disaggregation (serving/disaggregated.hpp) ---
  // Why the scheduler would refuse `request` ("" when it would not); any thread.
  [[nodiscard]] std::string validate(const GenerationRequest& request) const;
  // Decode side: queues a prefilled sequence (PrefilledRequest says who calls what when). Refused
  // (invalid, draining) without calling release: the caller still holds the source blocks then.
  SubmitResult submit_prefilled(PrefilledRequest request, TokenSink sink);
  // Prefill side: who takes the handed-off sequences. Set it before the first submission; a
  // sequence handed off with none set ends with an error.
  void set_hand_off_handler(HandOffHandler handler);
  // Prefill side: frees a handed-off sequence's blocks, on the engine thread soon after. Any thread.
  void release_handed_off(RequestId id);
  // Returns once every accepted request finished and every handed-off one was released, without
  // refusing new ones (drain() does both). For tests and shutdown paths.
  void wait_idle();
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
  struct PrefilledSubmission {
    RequestId id;
    PrefilledRequest request;
    TokenSink sink;
  };
  struct KvSource {
    std::function<void(std::span<const BlockId>)> copy_kv;
    std::function<void()> release;
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
  // Decode side: admits prefilled sequences and copies their K/V in (before a step is scheduled).
  void admit_prefilled();
  // Prefill side: passes the step's handed-off sequences to the handler.
  void pass_on(std::vector<HandOff> handoffs);
  // Releases the source blocks of a prefilled sequence that ended before its copy.
  void release_kv_source(RequestId id);

  ModelRunner& m_runner;
  SchedulerConfig m_config;
  std::string m_model_name;
  // Engine thread only, but for validate() (reads the immutable config) from submit().
  Scheduler m_scheduler;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;  // the engine thread: new work or stop
  std::condition_variable m_idle;  // drain(): the last request finished
  std::deque<Submission> m_incoming;
  std::deque<PrefilledSubmission> m_incoming_prefilled;
  std::vector<RequestId> m_cancels;
  std::vector<RequestId> m_releases;  // prefill side: handed-off sequences to free
  HandOffHandler m_hand_off;
  bool m_stop = false;
  bool m_draining = false;
  RequestId m_next_id = 1;
  // Accepted and not yet given their final event or, handed off, not yet released.
  std::int64_t m_unfinished = 0;
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
  std::unordered_map<RequestId, KvSource> m_kv_sources;  // prefilled, K/V not copied yet

  std::thread m_thread;  // last: starts after everything above is built
};

}  // namespace aisp::serving
