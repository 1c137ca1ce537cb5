// The worker side of `aisp profile` (device/profiler.hpp): runs under ncu, one variant per process.
// Validate once (a wrong kernel's counters are not worth reading), warm up, then exactly one launch inside
// the NVTX range that ncu's --nvtx-include filter selects; every other launch of the process (warm-up,
// validation, the gate's own kernels) stays outside it. The outcome goes to a small JSON file because ncu
// sits between this process and the parent: no pipe reaches across it.
#include <cuda_runtime_api.h>
#include <sys/prctl.h>

#include <csignal>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/profile/profile.hpp"
#include "device/cuda_check.hpp"
#include "device/device_info.hpp"
#include "device/gate.hpp"
#include "device/harness.hpp"
#include "device/ladder.hpp"
#include "device/nvtx.hpp"
#include "device/profiler.hpp"

namespace aisp {

namespace {

struct StreamGuard {
  cudaStream_t stream = nullptr;
  ~StreamGuard() {
    if (stream) cudaStreamDestroy(stream);
  }
};

// Fills `result` (status, reason, declared work). Throws on CUDA errors; the caller records them.
void profile_one(const nlohmann::json& cfg, nlohmann::json& result) {
  const std::string target = cfg.at("target").get<std::string>();
  const std::string stem = cfg.at("variant").get<std::string>();
  const TargetEntry* entry = LadderRegistry::instance().find(target);
  if (!entry) throw std::runtime_error("unknown target " + target);
  const VariantEntry* variant = nullptr;
  for (const auto& v : entry->variants) {
    if (v.info.file_stem() == stem) variant = &v;
  }
  if (!variant) throw std::runtime_error("unknown variant " + target + ":" + stem);
  const std::string name = entry->info.variant_name(variant->info);

  const int device_index = cfg.at("device").get<int>();
  AISP_CUDA_CHECK(cudaSetDevice(device_index));
  const DeviceFacts device = query_device(device_index);
  if (const std::string gap = requirement_gap(variant->info, device); !gap.empty()) {
    result["status"] = "skipped";
    result["reason"] = gap;
    return;
  }
  StreamGuard guard;
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&guard.stream, cudaStreamNonBlocking));
  const cudaStream_t stream = guard.stream;

  AxisValues axes;
  for (const auto& [k, v] : cfg.at("axes").items()) axes[k] = v.get<std::int64_t>();
  auto problem = entry->make_problem();
  problem->allocate(axes, device);
  const Work work = problem->work();
  result["bytes_per_launch"] = work.bytes;
  result["flops_per_launch"] = work.flops;
  result["l2_bytes"] = device.l2_bytes;
  problem->generate(cfg.at("seed").get<std::uint64_t>(), stream);
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Not wrapped with_nvtx_range: the profiled launch must sit in the profile range alone, not nested in
  // the variant's own range (ncu's filter grammar treats nesting separately).
  auto impl = variant->make();
  try {
    impl->setup(*problem, stream);
  } catch (const VariantUnavailable& e) {
    result["status"] = "skipped";
    result["reason"] = e.what();
    return;
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto named_launch = [&] {
    const NvtxRange range(name.c_str());
    impl->launch(*problem, stream);
  };

  for (const auto& o : problem->outputs()) poison(o, stream);
  named_launch();
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto outs = problem->outputs();
  const auto refs = problem->references();
  if (const std::string why = problem->judge_outputs(stream); !why.empty()) {
    result["status"] = "failed";
    result["reason"] = "validation failed before profiling: " + why;
    return;
  }
  for (std::size_t i = 0; i < outs.size() && i < refs.size(); ++i) {
    const auto cmp = compare(outs[i], refs[i], problem->tolerance(), stream);
    if (cmp.mismatches > 0) {
      result["status"] = "failed";
      result["reason"] = fmt::format(
          "validation failed before profiling: {} of {} elements of '{}' out of "
          "tolerance",
          cmp.mismatches, cmp.checked, outs[i].name);
      return;
    }
  }

  const int warmup = cfg.at("warmup_launches").get<int>();
  for (int i = 0; i < warmup; ++i) named_launch();
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));

  {
    const std::string range_name = cfg.at("range").get<std::string>();
    const NvtxRange range(range_name.c_str());
    impl->launch(*problem, stream);
  }
  // Synchronized outside the range: range replay measures the range as a unit and needs no waits in it.
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  result["status"] = "launched";
}

}  // namespace

int profile_worker_main(const std::string& config_path) {
  // When ncu ends (killed on a timeout, say), this process must not go on holding the GPU.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  nlohmann::json result{{"status", "error"}, {"reason", ""}};
  std::string result_path;
  int rc = 0;
  try {
    std::ifstream in(config_path);
    if (!in) throw std::runtime_error("cannot read " + config_path);
    std::stringstream text;
    text << in.rdbuf();
    const auto cfg = nlohmann::json::parse(text.str());
    result_path = cfg.at("result").get<std::string>();
    profile_one(cfg, result);
  } catch (const std::exception& e) {
    result["status"] = "error";
    result["reason"] = e.what();
    rc = 1;
  }
  if (result_path.empty()) {
    std::fprintf(stderr, "aisp: __profile-worker: %s\n", result.value("reason", "").c_str());
    return 2;
  }
  // Application replay runs this process once per pass: each run rewrites the same outcome.
  const std::string tmp = result_path + ".tmp";
  {
    std::ofstream out(tmp);
    out << result.dump(2) << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, result_path, ec);
  return ec ? 1 : rc;
}

}  // namespace aisp
