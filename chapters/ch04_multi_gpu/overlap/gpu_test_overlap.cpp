// ch04:overlap on one GPU. NCCL allows one rank per GPU, so every step runs over one rank here: each
// all-reduce is then a copy (grad -> out), but the streams, events, buckets, group calls and cuBLASLt GEMMs
// all run, for each phase, at a size where the steps' buckets differ (02: one per layer; 03 and 04: DDP's
// rule with a small cap, several layers per bucket). The problem is built through allocate_ranks, which
// accepts one rank (the harness's rank_devices refuses ranks=1). Every output is poisoned, then compared
// with the gate's reference, which is itself checked against the host's fp64; the inputs must come out
// unchanged (the all-reduce is out of place). SKIPPED, with the reason, where NCCL cannot be loaded. The
// harness never runs this ladder on one GPU (every step is SKIPPED there); timing means nothing here and
// is not taken.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/overlap/problem.hpp"
#include "device/device_info.hpp"

namespace aisp::ch04::overlap {
namespace {

// 9 layers of 256 x 256 fp32 gradients (256 KiB each) over 192 tokens; a 600 KiB cap. DDP's rule gives
// {8..5} (the first bucket closes at exactly 1 MiB), {4..2}, {1, 0}: three buckets.
constexpr int k_layers = 9, k_hidden = 256, k_tokens = 192;
constexpr std::size_t k_cap = 600 * 1024;

TEST(Ch04Overlap, EveryStepAndPhaseIsRightOverOneRank) {
  const TargetEntry* entry = LadderRegistry::instance().find("ch04:overlap");
  ASSERT_NE(entry, nullptr);
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  const DeviceFacts facts = query_device(device);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  const Shape shape = make_shape(k_layers, k_hidden, k_tokens);
  ASSERT_EQ(assign_buckets(k_layers, shape.layer_bytes(), k_cap).size(), 3u);
  const std::map<std::string, std::string> want_buckets = {
      {"serial", "1"},         {"bucketed_overlap", std::to_string(k_layers)}, {"tuned_buckets", "3"},
      {"priority_comm", "3"}, {"sm_margin", "3"}};
  std::size_t runs = 0;
  for (const Phase phase : {Phase::step, Phase::compute, Phase::comms}) {
    OverlapProblem problem;
    problem.allocate_ranks(shape, phase, k_cap, {device}, facts);
    const std::string at = " phase " + std::to_string(static_cast<int>(phase));
    // Every step set up at once, as the harness keeps them (each with its own communicator).
    std::vector<std::unique_ptr<VariantBase>> steps;
    for (const auto& v : entry->variants) {
      ASSERT_TRUE(want_buckets.count(v.info.slug)) << "a step this test does not know: " << v.info.slug;
      steps.push_back(v.make());
      try {
        steps.back()->setup(problem, stream);
      } catch (const VariantUnavailable& e) {
        steps.clear();
        AISP_CUDA_CHECK(cudaStreamDestroy(stream));
        GTEST_SKIP() << e.what();
      }
      EXPECT_EQ(fact_value(steps.back()->facts(problem), "buckets"), want_buckets.at(v.info.slug)) << v.info.slug << at;
    }
    for (const std::uint64_t seed : {11ull, 12ull}) {
      problem.generate(seed, stream);
      EXPECT_EQ(problem.check_reference_on_host(stream), "") << at << " seed " << seed;
      std::vector<std::uint64_t> input_hashes;
      for (const auto& in : problem.inputs()) input_hashes.push_back(hash_bytes(in, stream));
      for (std::size_t s = 0; s < steps.size(); ++s) {
        const std::string name = entry->variants[s].info.file_stem() + at + " seed " + std::to_string(seed);
        for (const auto& out : problem.outputs()) poison(out, stream);
        steps[s]->launch(problem, stream);
        steps[s]->launch(problem, stream);  // twice: the streams, events and buckets are reused
        const auto outs = problem.outputs();
        const auto refs = problem.references();
        ASSERT_EQ(outs.size(), phase == Phase::step ? 2u : 1u) << name;
        ASSERT_EQ(refs.size(), outs.size()) << name;
        for (std::size_t i = 0; i < outs.size(); ++i) {
          const CompareOutcome c = compare(outs[i], refs[i], problem.tolerance(), stream, 3, 0);
          EXPECT_EQ(c.mismatches, 0u) << name << " " << outs[i].name;
          EXPECT_EQ(c.checked, shape.gradient_elements()) << name << " " << outs[i].name;
        }
        const auto ins = problem.inputs();
        for (std::size_t i = 0; i < ins.size(); ++i) {
          EXPECT_EQ(hash_bytes(ins[i], stream), input_hashes[i]) << name << ": " << ins[i].name << " was written";
        }
        ++runs;
      }
    }
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(runs, 3u * entry->variants.size() * 2u);  // phases x steps x seeds
}

}  // namespace
}  // namespace aisp::ch04::overlap
