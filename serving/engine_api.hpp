// What the HTTP server (and anything else that serves requests) sees of the engine. Plain C++.
//
// A request is submitted with a sink; the engine's own thread calls the sink once per generated token and
// once more with `finished` set. The sink must not block for long (the server hands tokens to the
// connection's thread through a queue). cancel() is how a disconnected client gives its KV blocks back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "serving/runner_api.hpp"

namespace aisp::serving {

enum class FinishReason { none, length, stop, cancelled, error };

struct GenerationRequest {
  std::vector<TokenId> prompt;
  int max_tokens = 16;
  std::vector<TokenId> stop_token_ids;   // generation ends after emitting one of these
  bool ignore_eos = false;               // benchmarks: always generate max_tokens
};

struct TokenEvent {
  TokenId token = -1;                    // -1 on the final event when no token comes with it
  bool finished = false;
  FinishReason reason = FinishReason::none;
  std::string error;                     // set when reason == error
};

using TokenSink = std::function<void(const TokenEvent&)>;
using RequestId = std::int64_t;

enum class SubmitStatus { accepted, queue_full, draining, invalid };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::accepted;
  RequestId id = -1;
  std::string message;                   // why, when not accepted
};

struct ModelInfo {
  std::string name;                      // served model name (the folder's name by default)
  int vocab_size = 0;
  int max_context = 0;                   // prompt + generated tokens
  int eos_token_id = -1;                 // -1: none known
};

struct EngineStats {
  std::int64_t requests_total = 0;       // accepted since start
  std::int64_t requests_finished = 0;
  std::int64_t requests_rejected = 0;    // queue full or draining
  int waiting = 0;                       // queued, not yet scheduled
  int running = 0;                       // holding KV blocks
  int kv_blocks_used = 0;
  int kv_blocks_total = 0;
  std::int64_t preemptions = 0;
  std::int64_t steps = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;
  // Prefix caching (Scheduler::prefix_cache_stats; all 0 when it is off): tokens of admitted sequences
  // looked up, of which found cached; cached blocks now (in use or evictable); evictions so far.
  bool prefix_cache = false;
  std::int64_t prefix_cache_queried_tokens = 0;
  std::int64_t prefix_cache_hit_tokens = 0;
  int kv_blocks_cached = 0;
  std::int64_t prefix_cache_evictions = 0;
  // Speculative decoding (Scheduler::acceptance_stats; all 0 when it is off): verifications (one
  // sequence's drafts checked in one step), the drafts they checked, of which accepted, and the
  // tokens they emitted (accepted + 1 each, unless the sequence ended inside the run).
  bool speculative = false;
  std::int64_t spec_verifications = 0;
  std::int64_t spec_draft_tokens = 0;
  std::int64_t spec_accepted_tokens = 0;
  std::int64_t spec_emitted_tokens = 0;
  // Where the engine thread's time goes, cumulative since start (EngineLoop, engine_loop.cpp says
  // exactly what each covers). busy_time - runner_time is the host work the serving path adds around
  // the runner's steps. Engines with no runner to time (the FakeEngine) leave step_timing false, and
  // the server then exports no such counters.
  bool step_timing = false;
  std::chrono::nanoseconds runner_time{0};  // sum of runner.step() durations
  std::chrono::nanoseconds busy_time{0};    // wall time of the iterations that ran a step
};

class Engine {
 public:
  virtual ~Engine() = default;
  [[nodiscard]] virtual ModelInfo info() const = 0;
  virtual SubmitResult submit(GenerationRequest request, TokenSink sink) = 0;
  virtual void cancel(RequestId id) = 0;
  [[nodiscard]] virtual EngineStats stats() const = 0;
  // Stop accepting requests (submit answers `draining`) and return once every accepted one finished.
  virtual void drain() = 0;
};

}  // namespace aisp::serving
