// A fake Engine for tests and demos (`aisp serve --fake-engine`): no model, no GPU. Its own thread
// runs "steps" every `token_delay`; each step admits waiting requests up to max_running and gives
// every running request its next token, which is a pure function of the prompt (fake_token), so a
// client can check what it received. It keeps the contract the server relies on: sinks are called
// from the engine's thread, in order, the last call with `finished`; submit refuses when the queue
// is full or while draining; cancel() frees the request at the next step (and is recorded, for
// tests).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "serving/engine_api.hpp"

namespace aisp::serving {

struct FakeEngineOptions {
  std::string model_name = "aisp-fake";
  int vocab_size = 32000;
  int max_context = 4096;
  int eos_token_id = -1;
  int max_running = 64;   // requests that decode together, one token each per step
  int max_waiting = 1024; // submit answers queue_full beyond this
  std::chrono::microseconds token_delay{2000}; // the time of one step
  int kv_blocks_total = 4096;
  int block_size = 16;
  bool separate_final_event = false; // finish with {token -1, finished} after the last token
  int error_after_tokens = -1;       // >= 0: end every request with an error after N tokens
};

// The k-th generated token (k from 0) of a request with this prompt.
[[nodiscard]] TokenId fake_token(const std::vector<TokenId> &prompt, int k, int vocab_size);

class FakeEngine : public Engine {
public:
  explicit FakeEngine(FakeEngineOptions options = {});
  ~FakeEngine() override;
  FakeEngine(const FakeEngine &) = delete;
  FakeEngine &operator=(const FakeEngine &) = delete;

  [[nodiscard]] ModelInfo info() const override;
  SubmitResult submit(GenerationRequest request, TokenSink sink) override;
  void cancel(RequestId id) override;
  [[nodiscard]] EngineStats stats() const override;
  void drain() override;

  // Test hooks. While paused no step runs: requests stay where they are (queue-full tests).
  void set_paused(bool paused);
  [[nodiscard]] std::vector<RequestId> cancel_calls() const;
  // True once cancel(id) was called, waiting at most `timeout`.
  bool wait_for_cancel(RequestId id, std::chrono::milliseconds timeout) const;

private:
  struct Sequence {
    RequestId id = 0;
    GenerationRequest request;
    TokenSink sink;
    int generated = 0;
  };
  void loop();

  FakeEngineOptions m_options;
  mutable std::mutex m_mutex;
  mutable std::condition_variable m_cv; // steps, drain and cancel waiters
  std::deque<Sequence> m_waiting;
  std::vector<Sequence> m_running;
  std::set<RequestId> m_to_cancel;
  std::vector<RequestId> m_cancel_calls;
  EngineStats m_stats;
  RequestId m_next_id = 1;
  bool m_paused = false;
  bool m_draining = false;
  bool m_stop = false;
  bool m_delivering = false; // a step's events are being handed to sinks
  std::thread m_thread;
};

} // namespace aisp::serving
