// The two-GPU serving ladders' shared problem parts (two_gpu_cluster.hpp).
#include "serving/gpu/two_gpu_cluster.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/current_device.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/ladder_workload.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"

namespace aisp::serving::gpu {

int narrow_axis(const AxisValues& axes, std::string_view target, const char* name, std::int64_t most) {
  const std::int64_t v = axes.at(name);
  if (v > most) throw UsageError(fmt::format("{}: {}={} is too large (at most {})", target, name, v, most));
  return static_cast<int>(v);
}

LoadSpec load_from_axes(const AxisValues& axes, std::string_view target) {
  return {.rate = static_cast<double>(narrow_axis(axes, target, "rate", 1 << 20)),
          .concurrency = narrow_axis(axes, target, "concurrency", 1 << 16),
          .seed = 1,
          .request_timeout_s = 90};
}

RoutingSlo slo_from_axes(const AxisValues& axes, std::string_view target) {
  return {.ttft_ms = static_cast<double>(narrow_axis(axes, target, "ttft_slo_ms", 1 << 30)),
          .tpot_ms = static_cast<double>(narrow_axis(axes, target, "tpot_slo_ms", 1 << 30))};
}

TwoGpuCluster::TwoGpuCluster(TwoGpuClusterSpec spec, const DeviceFacts& device) : m_spec(std::move(spec)) {
  const int longest = tenant_workload_longest(m_spec.workload);
  const int blocks_per_request = (longest + k_block_size - 1) / k_block_size;
  if (m_spec.kv_blocks < blocks_per_request) {
    throw UsageError(fmt::format("{}: kv_blocks={} cannot hold one request of {} tokens ({} blocks)",
                                 m_spec.target, m_spec.kv_blocks, longest, blocks_per_request));
  }
  m_peer = device.device_count >= 2 ? (device.index + 1) % device.device_count : device.index;
  m_tokens = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_spec.workload.requests) *
                                        static_cast<std::size_t>(m_spec.workload.output_max));
  m_inputs = DeviceBuffer<std::int32_t>(1);
  if (device.device_count < 2) return;

  const ModelWeights weights = ModelWeights::open(cached_ladder_model(m_spec.preset, m_spec.target));
  RunnerOptions opt;
  opt.block_size = k_block_size;
  opt.num_kv_blocks = m_spec.kv_blocks;
  opt.max_batched_tokens = m_spec.token_budget;
  opt.max_context = longest;
  opt.cuda_graphs = true;
  m_runners.push_back(std::make_unique<LlamaRunner>(weights, opt));
  m_runners.back()->capture_graphs(m_spec.max_running, longest);
  {
    CurrentDevice on(m_peer);
    m_runners.push_back(std::make_unique<LlamaRunner>(weights, opt));
    m_runners.back()->capture_graphs(m_spec.max_running, longest);
  }
  const LlamaRunner& r = *m_runners.front();
  const ModelConfig& cfg = r.config();
  m_spec.workload.vocab = cfg.vocab_size;
  m_spec.workload.first_id = std::min(cfg.vocab_size - 1, 3);  // past the usual special ids of small vocabularies
  m_params = static_cast<double>(weight_bytes(cfg)) / 2.0;     // bf16
  m_distinct_tokens = tenant_workload_distinct_tokens(m_spec.workload);

  ClusterOptions co;
  co.engines = 2;
  co.model = {.name = m_spec.target, .vocab_size = r.vocab_size(), .max_context = r.max_context(), .eos_token_id = -1};
  co.threads = std::max(m_spec.concurrency > 0 ? m_spec.concurrency : m_spec.workload.requests, 1) + 8;
  m_servers = std::make_unique<RoutedCluster>(co);

  std::size_t input_tokens = 0;
  for (const Prompt& p : make_tenant_workload(m_spec.workload, 0).prompts) input_tokens += p.ids.size();
  m_inputs = DeviceBuffer<std::int32_t>(std::max<std::size_t>(input_tokens, 1));
}

TwoGpuCluster::~TwoGpuCluster() {
  m_servers.reset();
  if (m_runners.size() > 1) {
    // The peer runner's handles and graphs belong to the peer's context.
    release_on_device(m_peer, [&] { m_runners[1].reset(); });
  }
}

void TwoGpuCluster::generate(std::uint64_t seed, cudaStream_t stream) {
  if (m_runners.empty()) return;  // one GPU: nothing runs
  m_workload = make_tenant_workload(m_spec.workload, seed);
  std::vector<std::int32_t> flat;
  flat.reserve(m_inputs.size());
  for (const Prompt& p : m_workload.prompts) flat.insert(flat.end(), p.ids.begin(), p.ids.end());
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_inputs.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> TwoGpuCluster::inputs() const {
  return {{"prompts", m_inputs.data(), m_inputs.size(), DType::i32}};
}

std::vector<TensorView> TwoGpuCluster::outputs() const {
  return {{"outputs", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work TwoGpuCluster::work() const { return {.flops = 2.0 * m_params * m_distinct_tokens, .flop_dtype = "bf16"}; }

SchedulerConfig TwoGpuCluster::engine_config(int max_running) const {
  SchedulerConfig config;
  config.max_running = max_running;
  config.max_batched_tokens = m_spec.token_budget;
  config.block_size = k_block_size;
  config.max_waiting = m_spec.workload.requests + 1;  // none is refused
  return config;
}

void TwoGpuCluster::store_outputs(const ClusterRun& run, std::string_view step, cudaStream_t stream) {
  if (const std::string why = check_complete(run, m_workload); !why.empty()) {
    throw std::runtime_error(fmt::format("{} ({}): {}", m_spec.target, step, why));
  }
  const auto width = static_cast<std::size_t>(m_spec.workload.output_max);
  std::vector<std::int32_t> flat(m_workload.prompts.size() * width, -1);
  for (std::size_t i = 0; i < m_workload.prompts.size(); ++i) {
    const auto& ids = run.load.records[i].token_ids;
    std::copy_n(ids.begin(), std::min(ids.size(), width), flat.begin() + static_cast<std::ptrdiff_t>(i * width));
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_tokens.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::string TwoGpuCluster::judge(cudaStream_t stream) {
  std::vector<std::int32_t> got(m_tokens.size());
  AISP_CUDA_CHECK(cudaMemcpyAsync(got.data(), m_tokens.data(), got.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (m_runners.empty()) return "no runners (one GPU)";
  const int vocab = m_spec.workload.vocab;
  const int width = m_spec.workload.output_max;
  JudgeTally tally;
  for (std::size_t i = 0; i < m_workload.prompts.size(); ++i) {
    const Prompt& p = m_workload.prompts[i];
    const std::int32_t* row = got.data() + i * static_cast<std::size_t>(width);
    for (int j = 0; j < width; ++j) {
      const bool token = row[j] >= 0 && row[j] < vocab;
      if (j < p.output_len && !token) return fmt::format("request {}: output token {} is {}", i, j, row[j]);
      if (j >= p.output_len && row[j] != -1) return fmt::format("request {}: more than {} tokens", i, p.output_len);
    }
    const std::string why = judge_generation(*m_runners.front(), p.ids,
                                             {row, static_cast<std::size_t>(p.output_len)}, static_cast<int>(i), tally);
    if (!why.empty()) return why;
  }
  return judge_totals(tally);
}

}  // namespace aisp::serving::gpu
