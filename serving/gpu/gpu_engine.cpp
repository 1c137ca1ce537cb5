#include "serving/gpu/gpu_engine.hpp"

#include <fmt/format.h>

#include "serving/gpu/current_device.hpp"
#include "serving/model_weights.hpp"

namespace aisp::serving {

namespace {

std::string served_name(const std::filesystem::path& dir, const GpuEngineOptions& options) {
  std::string name = options.served_name.empty()
                         ? std::filesystem::absolute(dir).lexically_normal().filename().string()
                         : options.served_name;
  return name.empty() ? "model" : name;
}

// The scheduler of an engine over `runner`: the runner's block size, and the model's eos unless told.
SchedulerConfig scheduler_for(const LlamaRunner& runner, SchedulerConfig sched) {
  sched.block_size = runner.block_size();
  const auto& eos = runner.config().eos_token_ids;
  if (sched.eos_token_id < 0 && !eos.empty()) sched.eos_token_id = eos.front();
  return sched;
}

std::string model_text(const std::string& name, const ModelConfig& c) {
  return fmt::format("model {} ({} layers, hidden {}, {} heads / {} KV heads, vocab {}, {:.2f} GB of bf16 weights)",
                     name, c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
                     c.vocab_size, static_cast<double>(weight_bytes(c)) / 1e9);
}

std::string pool_text(const LlamaRunner& r) {
  return fmt::format("KV pool {} blocks x {} tokens = {} tokens", r.num_kv_blocks(), r.block_size(),
                     static_cast<long long>(r.num_kv_blocks()) * r.block_size());
}

std::string budget_text(const SchedulerConfig& s) {
  return fmt::format("step budget {} tokens; max running {}; policy {}, kv {}, chunked prefill {}",
                     s.max_batched_tokens, s.max_running, policy_name(s.policy), kv_mode_name(s.kv_mode),
                     s.chunked_prefill ? "on" : "off");
}

}  // namespace

GpuEngine::GpuEngine(const std::filesystem::path& dir, GpuEngineOptions options) {
  m_name = served_name(dir, options);
  {
    // The mapping lives only while the runner copies from it: afterwards the weights are on the GPU and
    // the page cache may drop the files (the 8B model is 16 GB of host memory otherwise).
    const ModelWeights weights = ModelWeights::open(dir);
    m_runner = std::make_unique<LlamaRunner>(weights, options.runner);
  }
  m_loop = std::make_unique<EngineLoop>(*m_runner, scheduler_for(*m_runner, options.scheduler), m_name);
}

GpuEngine::~GpuEngine() {
  m_loop.reset();  // the engine thread stops before the runner it calls goes away
  m_runner.reset();
}

std::string GpuEngine::describe() const {
  return fmt::format("{}; {}; {}", model_text(m_name, m_runner->config()), pool_text(*m_runner),
                     budget_text(m_loop->config()));
}

DisaggregatedGpuEngine::DeviceRunner::~DeviceRunner() {
  if (runner) gpu::release_on_device(device, [this] { runner.reset(); });
}

DisaggregatedGpuEngine::DisaggregatedGpuEngine(const std::filesystem::path& dir, GpuEngineOptions options,
                                               DevicePair devices) {
  m_name = served_name(dir, options);
  m_prefill.device = devices.prefill;
  m_decode.device = devices.decode;
  {
    // One mapping for both uploads, released once both copies are on their GPUs (as GpuEngine's).
    const ModelWeights weights = ModelWeights::open(dir);
    // The prefill side hands every sequence off at its first token, so it never runs a decode-only
    // step: graphs would only be buffers nobody replays.
    RunnerOptions prefill_options = options.runner;
    prefill_options.cuda_graphs = false;
    {
      gpu::CurrentDevice on(m_prefill.device);
      m_prefill.runner = std::make_unique<LlamaRunner>(weights, prefill_options);
    }
    gpu::CurrentDevice on(m_decode.device);
    m_decode.runner = std::make_unique<LlamaRunner>(weights, options.runner);
  }
  m_mover = std::make_unique<RunnerKvMover>(*m_prefill.runner, *m_decode.runner);
  SchedulerConfig prefill = scheduler_for(*m_prefill.runner, options.scheduler);
  prefill.drafter = nullptr;  // the scheduler refuses drafts where nothing decodes
  m_engine = std::make_unique<DisaggregatedEngine>(*m_prefill.runner, *m_decode.runner, *m_mover, prefill,
                                                   scheduler_for(*m_decode.runner, options.scheduler), m_name);
}

DisaggregatedGpuEngine::~DisaggregatedGpuEngine() {
  m_engine.reset();  // both engine threads stop before the runners they call go away
  m_mover.reset();
}

std::string DisaggregatedGpuEngine::describe() const {
  return fmt::format("{}; disaggregated: prefill on device {}, {}; decode on device {}, {}; each side: {}",
                     model_text(m_name, m_prefill.runner->config()), m_prefill.device,
                     pool_text(*m_prefill.runner), m_decode.device, pool_text(*m_decode.runner),
                     budget_text(m_engine->decode_engine().config()));
}

}  // namespace aisp::serving
