// ch04:allreduce on one GPU: the steps that need no NCCL (the host-staged baseline and the hand-written
// ring) run with three and with two ranks sharing this GPU, and every rank's output must equal the sum.
// The harness never runs ranks that share a GPU (the variants are SKIPPED with one GPU, and NCCL refuses
// it); this checks the ring's schedule, chunking, kernels, streams and events on a real GPU where only
// one is lent. Timing means nothing here and is not taken.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"
#include "device/device_info.hpp"

namespace aisp::ch04::allreduce {
namespace {

TEST(Ch04Allreduce, StepsOtherThanNcclAreRightWithRanksSharingOneGpu) {
  const TargetEntry* entry = LadderRegistry::instance().find("ch04:allreduce");
  ASSERT_NE(entry, nullptr);
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  const DeviceFacts facts = query_device(device);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  std::size_t checked = 0;
  for (const int ranks : {3, 2}) {
    // An odd size: the last chunk's scalar tail, chunks of unequal length.
    for (const std::size_t n : {std::size_t{(1 << 16) + 3}, std::size_t{1000}}) {
      AllreduceProblem problem;
      problem.allocate_ranks(n, std::vector<int>(ranks, device), facts);
      for (const auto& v : entry->variants) {
        if (v.info.kind == VariantKind::vendor) continue;  // NCCL: one rank per GPU
        const std::string name = v.info.file_stem() + " ranks " + std::to_string(ranks) + " n " + std::to_string(n);
        auto variant = v.make();
        variant->setup(problem, stream);
        for (const std::uint64_t seed : {11ull, 12ull}) {
          problem.generate(seed, stream);
          for (const auto& out : problem.outputs()) poison(out, stream);
          variant->launch(problem, stream);
          variant->launch(problem, stream);  // twice: the events and streams are reused
          const auto outs = problem.outputs();
          const auto refs = problem.references();
          for (std::size_t r = 0; r < outs.size(); ++r) {
            const CompareOutcome c = compare(outs[r], refs[r], problem.tolerance(), stream, 3, 0);
            EXPECT_EQ(c.mismatches, 0u) << name << " seed " << seed << " rank " << r;
            EXPECT_EQ(c.checked, n);
          }
          ++checked;
        }
      }
    }
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(checked, 2u * 2u * 2u * 2u);  // rank counts x sizes x steps x seeds
}

}  // namespace
}  // namespace aisp::ch04::allreduce
