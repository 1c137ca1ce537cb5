// ch04:collectives on one GPU. Step 01 (peer copies, no NCCL) runs every op with three and with two ranks
// sharing this GPU, and every rank's output must equal its reference; the reference kernel is checked
// against the host for every op on the way. NCCL (vendor_nccl, as the harness calls it) runs every op over
// the one rank a one-GPU machine allows: each is then a copy (a self send/recv for all-to-all and
// send/recv). The harness never runs ranks that share a GPU (the variants are SKIPPED with one GPU, and
// NCCL refuses it); these tests check the copy lists, staging, kernels, streams and NCCL's calls on a real
// GPU where only one is lent. Timing means nothing here and is not taken.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/collectives/problem.hpp"
#include "device/device_info.hpp"

namespace aisp::ch04::collectives {
namespace {

std::string label(Collective op, int ranks, std::size_t n) {
  return std::string(op_name(op)) + " ranks " + std::to_string(ranks) + " n " + std::to_string(n);
}

// Poisons the outputs, launches twice (the streams, events and staging are reused) and compares every
// rank's output with its reference; returns the elements compared.
std::size_t launch_and_compare(CollectivesProblem& problem, VariantBase& variant, cudaStream_t stream,
                               const std::string& name) {
  for (const auto& out : problem.outputs()) poison(out, stream);
  variant.launch(problem, stream);
  variant.launch(problem, stream);
  const auto outs = problem.outputs();
  const auto refs = problem.references();
  std::size_t checked = 0;
  for (std::size_t r = 0; r < outs.size(); ++r) {
    const CompareOutcome c = compare(outs[r], refs[r], problem.tolerance(), stream, 3, 0);
    EXPECT_EQ(c.mismatches, 0u) << name << " rank " << r;
    EXPECT_EQ(c.checked, outs[r].count) << name << " rank " << r;
    checked += c.checked;
  }
  return checked;
}

TEST(Ch04Collectives, PeerCopiesAreRightForEveryOpWithRanksSharingOneGpu) {
  const TargetEntry* entry = LadderRegistry::instance().find("ch04:collectives");
  ASSERT_NE(entry, nullptr);
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  const DeviceFacts facts = query_device(device);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  std::size_t runs = 0;
  for (const int ranks : {3, 2}) {
    // An odd size: broadcast's and send/recv's buffers end off a 16-byte boundary, and the chunked ops
    // round n / R down to 4 elements as nccl-tests does (over 3 ranks: 21844 of 65539 per chunk).
    for (const std::size_t n : {std::size_t{(1 << 16) + 3}, std::size_t{1000}}) {
      for (const Collective op : k_ops) {
        CollectivesProblem problem;
        problem.allocate_ranks(op, n, std::vector<int>(ranks, device), facts);
        const Layout l = problem.args().layout;
        ASSERT_EQ(problem.outputs().size(), static_cast<std::size_t>(ranks));
        for (const auto& v : entry->variants) {
          if (v.info.kind == VariantKind::vendor) continue;  // NCCL: one rank per GPU
          const std::string name = v.info.file_stem() + " " + label(op, ranks, n);
          auto variant = v.make();
          variant->setup(problem, stream);
          for (const std::uint64_t seed : {11ull, 12ull}) {
            problem.generate(seed, stream);
            EXPECT_EQ(problem.check_reference_on_host(stream), "") << name << " seed " << seed;
            EXPECT_EQ(launch_and_compare(problem, *variant, stream, name + " seed " + std::to_string(seed)),
                      static_cast<std::size_t>(ranks) * l.out_count);
            ++runs;
          }
        }
      }
    }
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(runs, 2u * 2u * k_ops.size() * 2u);  // rank counts x sizes x ops x seeds (one non-NCCL step)
}

// vendor_nccl as the harness would call it, over one rank: NCCL found ($AISP_NCCL_LIBRARY, the library
// found at build time, or the loader's path), the communicator up, every op's group call right. SKIPPED
// where the step was not built (no nccl.h) or NCCL cannot be loaded.
TEST(Ch04Collectives, NcclRunsEveryOpOverOneRank) {
  const TargetEntry* entry = LadderRegistry::instance().find("ch04:collectives");
  ASSERT_NE(entry, nullptr);
  const VariantEntry* nccl_step = nullptr;
  for (const auto& v : entry->variants) {
    if (v.info.kind == VariantKind::vendor) nccl_step = &v;
  }
  if (!nccl_step) GTEST_SKIP() << "ch04:collectives was built without vendor_nccl (no nccl.h)";
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  const DeviceFacts facts = query_device(device);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&stream));
  constexpr std::size_t n = (1 << 20) + 3;
  for (const Collective op : k_ops) {
    CollectivesProblem problem;
    problem.allocate_ranks(op, n, {device}, facts);
    auto variant = nccl_step->make();
    try {
      variant->setup(problem, stream);
    } catch (const VariantUnavailable& e) {
      AISP_CUDA_CHECK(cudaStreamDestroy(stream));
      GTEST_SKIP() << e.what();
    }
    problem.generate(5, stream);
    const std::size_t want = problem.args().layout.out_count;
    EXPECT_EQ(launch_and_compare(problem, *variant, stream, "vendor_nccl " + label(op, 1, n)), want);
    if (op == k_ops.front()) {
      for (const Fact& f : variant->facts(problem)) GTEST_LOG_(INFO) << f.name << " " << f.value;
    }
  }
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace aisp::ch04::collectives
