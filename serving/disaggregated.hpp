// Prefill/decode disaggregation (DistServe, Zhong et al., OSDI 2024; Splitwise, Patel et al., ISCA
// 2024): one engine computes prompts, another decodes. A request is submitted to the prefill engine;
// when its prompt is computed and its first token sampled (and delivered), its KV blocks are copied
// into free blocks of the decode engine's pool and the decode engine goes on from there. Prefill
// steps (long, compute-bound) then never stall the decode steps (short, bandwidth-bound) of other
// requests, and each side can be sized and batched for its own phase. docs/serving.md,
// "Disaggregation", has the protocol.
//
// Who owns what, so that no request is lost or duplicated and no block is freed while it is read:
// - Until the hand-off, the prefill EngineLoop owns the request, as any request of its own.
// - At the hand-off (prefill thread) the prefill engine pins the blocks and forgets the sink;
//   DisaggregatedEngine queues the sequence on the decode engine (submit_prefilled). The decode
//   engine admits it when it has the blocks and a running slot (a full pool makes it wait there,
//   in order), copies the K/V through the KvBlockMover on its own thread, and only then releases
//   the prefill blocks (or releases them without copying when the request ends first).
// - A cancel goes to whichever engine owns the request at that moment (decided under one mutex with
//   the hand-off); a cancel that reaches the prefill engine just after the hand-off is answered by
//   the hand-off itself, which then does not forward the request.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "serving/engine_api.hpp"
#include "serving/engine_loop.hpp"
#include "serving/runner_api.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving {

// Moves K/V blocks from the prefill runner's pool into the decode runner's. Called on the decode
// engine's thread, between its steps; the source blocks are pinned for the call, and the copy must
// be complete (readable by the decode runner's next step) when it returns. Throws on failure: the
// request then ends with an error.
class KvBlockMover {
 public:
  virtual ~KvBlockMover() = default;
  virtual void move(std::span<const BlockId> src_blocks, std::span<const BlockId> dst_blocks) = 0;
};

// The mover of two runners that can copy between themselves: destination.copy_kv_blocks_from(source).
class RunnerKvMover final : public KvBlockMover {
 public:
  RunnerKvMover(ModelRunner& source, ModelRunner& destination)
      : m_source(source), m_destination(destination) {}
  void move(std::span<const BlockId> src_blocks, std::span<const BlockId> dst_blocks) override {
    m_destination.copy_kv_blocks_from(m_source, src_blocks, dst_blocks);
  }

 private:
  ModelRunner& m_source;
  ModelRunner& m_destination;
};

// The two CUDA devices of `aisp serve --disaggregate PREFILL,DECODE`.
struct DevicePair {
  int prefill = 0;
  int decode = 0;
};

// Parses "PREFILL,DECODE": two different non-negative device indices, e.g. "0,1". Anything else
// (one index, three, a sign, spaces, the same index twice) is an aisp::UsageError naming the
// option, before any device is looked at; whether the devices exist is the caller's check.
[[nodiscard]] DevicePair parse_device_pair(std::string_view text);

class DisaggregatedEngine final : public Engine {
 public:
  // Two runners of the same model (equal block size and vocabulary; aisp::UsageError otherwise),
  // each with its EngineLoop: `prefill_config` gets hand_off_after_prefill, and both must be
  // continuous with paged KV and share eos_token_id. Sizes left at 0 come from each runner, as for
  // EngineLoop. The runners and the mover must outlive the engine.
  DisaggregatedEngine(ModelRunner& prefill_runner, ModelRunner& decode_runner, KvBlockMover& mover,
                      SchedulerConfig prefill_config, SchedulerConfig decode_config,
                      std::string model_name = "aisp");
  // Cancels what is left (sinks see `cancelled`): stops the decode engine first, so that its
  // releases still reach the prefill engine, then the prefill engine.
  ~DisaggregatedEngine() override;
  DisaggregatedEngine(const DisaggregatedEngine&) = delete;
  DisaggregatedEngine& operator=(const DisaggregatedEngine&) = delete;

  // max_context is the smaller of the two engines'.
  [[nodiscard]] ModelInfo info() const override;
  // Validated against both engines; queue_full is the prefill engine's queue.
  SubmitResult submit(GenerationRequest request, TokenSink sink) override;
  void cancel(RequestId id) override;
  // Both engines' counters added up (runner and busy time too: two threads, so their sum may pass
  // the wall time). waiting: queued for prefill, or handed off and waiting for the decode pool.
  [[nodiscard]] EngineStats stats() const override;
  void drain() override;
  // Returns once every accepted request finished and every prefill block was released, without
  // refusing new requests.
  void wait_idle();

  // Each side's engine, for tests and metrics (their stats(), recent_steps()).
  [[nodiscard]] const EngineLoop& prefill_engine() const { return *m_prefill; }
  [[nodiscard]] const EngineLoop& decode_engine() const { return *m_decode; }
  // Requests handed off to the decode engine so far, and a wait until there are `count` (tests
  // that need a request to be past its hand-off).
  [[nodiscard]] std::int64_t handoffs() const;
  void wait_for_handoffs(std::int64_t count);

 private:
  enum class Phase { prefill, decode };
  struct Request {
    RequestId id = -1;
    TokenSink sink;
    Phase phase = Phase::prefill;
    RequestId prefill_id = -1;
    RequestId decode_id = -1;
    bool cancel_requested = false;
  };

  // Both engines' sinks: tokens straight through, and the final event closes the request.
  void on_event(const std::shared_ptr<Request>& request, const TokenEvent& event);
  // The prefill engine's hand-off handler (its thread).
  void on_hand_off(HandOff handoff);

  KvBlockMover& m_mover;
  std::string m_model_name;
  std::unique_ptr<EngineLoop> m_prefill;
  std::unique_ptr<EngineLoop> m_decode;

  mutable std::mutex m_mutex;
  std::condition_variable m_idle;       // m_unfinished reached 0
  std::condition_variable m_handed_off;  // m_handoffs grew
  std::unordered_map<RequestId, std::shared_ptr<Request>> m_requests;    // by client id
  std::unordered_map<RequestId, std::shared_ptr<Request>> m_by_prefill;  // until handed off
  RequestId m_next_id = 1;
  std::int64_t m_unfinished = 0;
  std::int64_t m_requests_total = 0;
  std::int64_t m_requests_finished = 0;
  std::int64_t m_requests_rejected = 0;
  std::int64_t m_prompt_tokens = 0;
  std::int64_t m_handoffs = 0;
  bool m_draining = false;
  bool m_stopping = false;
};

}  // namespace aisp::serving
