// ch04:tensor_parallel_gemm on one GPU. NCCL allows one rank per GPU, so every step runs over one rank here:
// each all-reduce, all-gather and reduce-scatter is then a copy, but the streams, events, chunks, group calls,
// cuBLASLt GEMMs and the GELU all run, for each phase. The problem is built through allocate_ranks, which
// accepts one rank (the harness's rank_devices refuses ranks=1). Every output is poisoned, then compared with
// the gate's reference after every launch (the first launch after new inputs included: a step that reads a
// buffer before it is written would see the previous seed's values there), and the reference itself is
// checked against the host's fp64; the inputs must come out unchanged. SKIPPED, with the reason, where NCCL
// cannot be loaded. The harness never runs this ladder on one GPU (every step is SKIPPED there); timing means
// nothing here and is not taken.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"
#include "device/device_info.hpp"

namespace aisp::ch04::tensor_parallel_gemm {
namespace {

// 256 tokens, hidden 128, ffn 256 over one rank, 4 chunks of 64 tokens: 03's GEMMs have another shape than
// the reference's (64 rows against 256).
constexpr int k_tokens = 256, k_hidden = 128, k_ffn = 256, k_chunks = 4;

TEST(Ch04TensorParallelGemm, EveryStepAndPhaseIsRightOverOneRank) {
  const TargetEntry* entry = LadderRegistry::instance().find("ch04:tensor_parallel_gemm");
  ASSERT_NE(entry, nullptr);
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  const DeviceFacts facts = query_device(device);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  const Shape shape = make_shape(k_tokens, k_hidden, k_ffn, 1, k_chunks);
  const std::map<std::string, std::string> want_chunks = {
      {"allreduce", "(none)"}, {"sequence_parallel", "(none)"}, {"chunked_overlap", std::to_string(k_chunks)}};
  std::size_t runs = 0;
  for (const Phase phase : {Phase::step, Phase::compute, Phase::comms}) {
    TensorParallelProblem problem;
    problem.allocate_ranks(shape, phase, {device}, facts);
    const std::string at = " phase " + std::to_string(static_cast<int>(phase));
    // Every step set up at once, as the harness keeps them (each with its own communicator).
    std::vector<std::unique_ptr<VariantBase>> steps;
    for (const auto& v : entry->variants) {
      ASSERT_TRUE(want_chunks.count(v.info.slug)) << "a step this test does not know: " << v.info.slug;
      steps.push_back(v.make());
      try {
        steps.back()->setup(problem, stream);
      } catch (const VariantUnavailable& e) {
        steps.clear();
        AISP_CUDA_CHECK(cudaStreamDestroy(stream));
        GTEST_SKIP() << e.what();
      }
      EXPECT_EQ(fact_value(steps.back()->facts(problem), "chunks"), want_chunks.at(v.info.slug)) << v.info.slug << at;
    }
    for (const std::uint64_t seed : {11ull, 12ull}) {
      problem.generate(seed, stream);
      EXPECT_EQ(problem.check_reference_on_host(stream), "") << at << " seed " << seed;
      std::vector<std::uint64_t> input_hashes;
      for (const auto& in : problem.inputs()) input_hashes.push_back(hash_bytes(in, stream));
      for (std::size_t s = 0; s < steps.size(); ++s) {
        const std::string name = entry->variants[s].info.file_stem() + at + " seed " + std::to_string(seed);
        for (int launch = 0; launch < 2; ++launch) {  // twice: the streams, events and chunks are reused
          for (const auto& out : problem.outputs()) poison(out, stream);
          steps[s]->launch(problem, stream);
          const auto outs = problem.outputs();
          const auto refs = problem.references();
          ASSERT_EQ(outs.size(), 1u) << name;  // one rank: its partial (phase 1) or its rows of Y
          ASSERT_EQ(refs.size(), outs.size()) << name;
          const CompareOutcome c = compare(outs[0], refs[0], problem.tolerance(), stream, 3, 0);
          EXPECT_EQ(c.mismatches, 0u) << name << " launch " << launch << " " << outs[0].name;
          EXPECT_EQ(c.checked, shape.activation_elements()) << name << " " << outs[0].name;
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
}  // namespace aisp::ch04::tensor_parallel_gemm
