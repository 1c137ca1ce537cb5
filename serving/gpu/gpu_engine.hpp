// The GPU engines: a model folder, the LlamaRunner over it and an EngineLoop, owned together behind the
// Engine interface the HTTP server talks to (`aisp serve --model DIR`); and the same model on two GPUs,
// one prefilling and one decoding (`aisp serve --model DIR --disaggregate PREFILL,DECODE`).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "serving/disaggregated.hpp"
#include "serving/engine_api.hpp"
#include "serving/engine_loop.hpp"
#include "serving/gpu/llama_runner.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving {

struct GpuEngineOptions {
  RunnerOptions runner;
  SchedulerConfig scheduler;     // block_size is taken from runner.block_size; eos from config.json
  std::string served_name;       // empty: the folder's name
};

class GpuEngine final : public Engine {
 public:
  // Opens and validates the folder, uploads the weights, sizes the KV pool, starts the engine thread.
  // The mapped files are released once the weights are on the GPU. Errors as LlamaRunner's.
  GpuEngine(const std::filesystem::path& dir, GpuEngineOptions options);
  ~GpuEngine() override;

  [[nodiscard]] ModelInfo info() const override { return m_loop->info(); }
  SubmitResult submit(GenerationRequest request, TokenSink sink) override {
    return m_loop->submit(std::move(request), std::move(sink));
  }
  void cancel(RequestId id) override { m_loop->cancel(id); }
  [[nodiscard]] EngineStats stats() const override { return m_loop->stats(); }
  void drain() override { m_loop->drain(); }

  [[nodiscard]] EngineLoop& loop() { return *m_loop; }
  [[nodiscard]] const ModelConfig& config() const { return m_runner->config(); }
  // One line for the log: the model, the pool, the budgets.
  [[nodiscard]] std::string describe() const;

 private:
  std::unique_ptr<LlamaRunner> m_runner;
  std::unique_ptr<EngineLoop> m_loop;
  std::string m_name;
};

// Prefill/decode disaggregation over two GPUs (docs/serving.md, "Prefill/decode disaggregation"): the
// model loaded on each device, the DisaggregatedEngine over the two runners and the RunnerKvMover that
// copies a prompt's K/V from the prefill GPU to the decode GPU, owned together behind Engine.
class DisaggregatedGpuEngine final : public Engine {
 public:
  // Reads the folder once and uploads the weights to both devices (each runner built with its device
  // current; the caller's current device is restored), each pool sized on its own GPU from
  // options.runner (CUDA graphs on the decode side only: the prefill side never runs a decode-only
  // step), then starts both engine threads. options.scheduler applies to both sides, except its
  // drafter: only the decode side decodes, so only it speculates. Errors as LlamaRunner's and
  // DisaggregatedEngine's (the continuous policy and paged KV, a UsageError otherwise). The devices
  // must differ and the decode device must be able to read the prefill device's memory: the caller
  // checks (`aisp serve` does, before loading); a copy without a peer path fails its request with a
  // UsageError.
  DisaggregatedGpuEngine(const std::filesystem::path& dir, GpuEngineOptions options, DevicePair devices);
  ~DisaggregatedGpuEngine() override;
  DisaggregatedGpuEngine(const DisaggregatedGpuEngine&) = delete;
  DisaggregatedGpuEngine& operator=(const DisaggregatedGpuEngine&) = delete;

  [[nodiscard]] ModelInfo info() const override { return m_engine->info(); }
  SubmitResult submit(GenerationRequest request, TokenSink sink) override {
    return m_engine->submit(std::move(request), std::move(sink));
  }
  void cancel(RequestId id) override { m_engine->cancel(id); }
  // Both sides added up (DisaggregatedEngine::stats): /metrics shows both pools and both step counts.
  [[nodiscard]] EngineStats stats() const override { return m_engine->stats(); }
  void drain() override { m_engine->drain(); }

  [[nodiscard]] DisaggregatedEngine& engine() { return *m_engine; }
  [[nodiscard]] const ModelConfig& config() const { return m_prefill.runner->config(); }
  // One line for the log: the model, each side's device and pool, the budgets.
  [[nodiscard]] std::string describe() const;

 private:
  // A runner released with its own device current (its stream, handles and graphs belong to that
  // device's context), also when the constructor throws after building it.
  struct DeviceRunner {
    int device = 0;
    std::unique_ptr<LlamaRunner> runner;
    ~DeviceRunner();
  };

  DeviceRunner m_prefill;
  DeviceRunner m_decode;
  std::unique_ptr<RunnerKvMover> m_mover;
  std::unique_ptr<DisaggregatedEngine> m_engine;
  std::string m_name;
};

}  // namespace aisp::serving
