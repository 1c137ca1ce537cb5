// The GPU engine: a model folder, the LlamaRunner over it and an EngineLoop, owned together behind the
// Engine interface the HTTP server talks to (`aisp serve --model DIR`).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

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

}  // namespace aisp::serving
