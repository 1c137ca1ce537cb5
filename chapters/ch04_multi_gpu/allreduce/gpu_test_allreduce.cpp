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
#if __has_include(<nccl.h>)
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#endif

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

#if __has_include(<nccl.h>)
// NCCL as vendor_nccl loads and calls it, with the one rank a one-GPU machine allows (an all-reduce over
// one rank is a copy): the loader finds the library ($AISP_NCCL_LIBRARY, or the loader's path), the
// communicator comes up, and a group call runs on the stream. SKIPPED where NCCL cannot be loaded.
TEST(Ch04Allreduce, NcclLoadsAndAllReducesOverOneRank) {
  const nccl::Api* api = nullptr;
  try {
    api = &nccl::api();
  } catch (const VariantUnavailable& e) {
    GTEST_SKIP() << e.what();
  }
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    nccl::Communicators comms;
    comms.init({device});
    constexpr std::size_t n = (1 << 20) + 3;
    DeviceBuffer<float> in(n), out(n);
    const TensorView in_view{"in", in.data(), n, DType::f32}, out_view{"out", out.data(), n, DType::f32};
    fill_uniform(in_view, 7, -1.0, 1.0, stream);
    poison(out_view, stream);
    nccl::check(api->group_start(), "ncclGroupStart");
    nccl::check(api->all_reduce(in.data(), out.data(), n, ncclFloat32, ncclSum, comms[0], stream), "ncclAllReduce");
    nccl::check(api->group_end(), "ncclGroupEnd");
    const CompareOutcome c = compare(out_view, in_view, {0.0, 0.0}, stream, 3, 0);
    EXPECT_EQ(c.mismatches, 0u);
    EXPECT_EQ(c.checked, n);
    GTEST_LOG_(INFO) << "NCCL " << api->version << " from " << api->path;
  }
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
}
#endif

}  // namespace
}  // namespace aisp::ch04::allreduce
