#include "serving/gpu/gpu_engine.hpp"

#include <fmt/format.h>

#include "serving/model_weights.hpp"

namespace aisp::serving {

GpuEngine::GpuEngine(const std::filesystem::path& dir, GpuEngineOptions options) {
  m_name = options.served_name.empty() ? std::filesystem::absolute(dir).lexically_normal().filename().string()
                                       : options.served_name;
  if (m_name.empty()) m_name = "model";
  {
    // The mapping lives only while the runner copies from it: afterwards the weights are on the GPU and
    // the page cache may drop the files (the 8B model is 16 GB of host memory otherwise).
    const ModelWeights weights = ModelWeights::open(dir);
    m_runner = std::make_unique<LlamaRunner>(weights, options.runner);
  }
  SchedulerConfig sched = options.scheduler;
  sched.block_size = m_runner->block_size();
  const auto& eos = m_runner->config().eos_token_ids;
  if (sched.eos_token_id < 0 && !eos.empty()) sched.eos_token_id = eos.front();
  m_loop = std::make_unique<EngineLoop>(*m_runner, sched, m_name);
}

GpuEngine::~GpuEngine() {
  m_loop.reset();  // the engine thread stops before the runner it calls goes away
  m_runner.reset();
}

std::string GpuEngine::describe() const {
  const auto& c = m_runner->config();
  const auto& s = m_loop->config();
  return fmt::format(
      "model {} ({} layers, hidden {}, {} heads / {} KV heads, vocab {}, {:.2f} GB of bf16 weights); KV pool "
      "{} blocks x {} tokens = {} tokens; step budget {} tokens; max running {}; policy {}, kv {}, "
      "chunked prefill {}",
      m_name, c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
      static_cast<double>(weight_bytes(c)) / 1e9, m_runner->num_kv_blocks(), m_runner->block_size(),
      static_cast<long long>(m_runner->num_kv_blocks()) * m_runner->block_size(), s.max_batched_tokens,
      s.max_running, policy_name(s.policy), kv_mode_name(s.kv_mode), s.chunked_prefill ? "on" : "off");
}

}  // namespace aisp::serving
