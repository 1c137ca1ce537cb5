// The occupancy formula against cases worked by hand (docs/occupancy.md shows the arithmetic of the first).
#include <gtest/gtest.h>

#include <vector>

#include "core/base/error.hpp"
#include "core/measure/occupancy.hpp"

namespace {

using namespace aisp::occupancy;

ArchLimits sm(const char* name) {
  const auto a = find_architecture(name);
  EXPECT_TRUE(a.has_value()) << name;
  return a.value_or(ArchLimits{});
}

TEST(Occupancy, FullOccupancyWhenWarpsAndRegistersTie) {
  // 256 threads = 8 warps; 64 warp slots / 8 = 8 blocks. 32 regs x 32 lanes = 1024 per warp; a quarter
  // of the 64 Ki register file holds 16 such warps, x4 = 64 warps = 8 blocks: both limits give 8.
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 256, .regs_per_thread = 32, .smem_per_block = 0});
  EXPECT_EQ(o.warps_per_block, 8);
  EXPECT_EQ(o.regs_per_warp, 1024);
  EXPECT_EQ(o.blocks_by_warps, 8);
  EXPECT_EQ(o.blocks_by_registers, 8);
  EXPECT_EQ(o.smem_per_block, 1024);  // only the driver's reserved KiB
  EXPECT_EQ(o.blocks_by_smem, 228);
  EXPECT_EQ(o.active_blocks, 8);
  EXPECT_EQ(o.active_warps, 64);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  EXPECT_EQ(o.binding, (std::vector<Limiter>{Limiter::warps, Limiter::registers}));
}

TEST(Occupancy, RegistersBindAt72PerThread) {
  // 72 x 32 = 2304 registers per warp (a multiple of 256); 16384 / 2304 = 7 warps per sub-partition,
  // 28 per SM, 28 / 8 = 3 blocks of 256 threads: 24 warps of 64 = 37.5%.
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 256, .regs_per_thread = 72, .smem_per_block = 0});
  EXPECT_EQ(o.regs_per_warp, 2304);
  EXPECT_EQ(o.blocks_by_registers, 3);
  EXPECT_EQ(o.active_blocks, 3);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.375);
  EXPECT_EQ(o.binding, std::vector<Limiter>{Limiter::registers});
}

TEST(Occupancy, RegisterCountRoundsUpToTheAllocationUnit) {
  // 33 x 32 = 1056 -> 1280 per warp; 16384 / 1280 = 12 per sub-partition, 48 warps = 6 blocks = 75%.
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 256, .regs_per_thread = 33, .smem_per_block = 0});
  EXPECT_EQ(o.regs_per_warp, 1280);
  EXPECT_EQ(o.active_blocks, 6);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.75);
}

TEST(Occupancy, SharedMemoryBindsWithTheReservedKiB) {
  // 48 KiB + 1 KiB reserved = 50176 bytes (a multiple of 128); 233472 / 50176 = 4.65 -> 4 blocks of
  // 4 warps = 16 of 64 warps = 25%. Without the reserved KiB it would be 233472 / 49152 = 4 as well,
  // so also check 45 KiB: 46080 + 1024 = 47104 -> 4.96 -> 4 (5 without the reservation).
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 128, .regs_per_thread = 40, .smem_per_block = 48 * 1024});
  EXPECT_EQ(o.smem_per_block, 50176);
  EXPECT_EQ(o.blocks_by_smem, 4);
  EXPECT_EQ(o.blocks_by_registers, 12);
  EXPECT_EQ(o.active_blocks, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.25);
  EXPECT_EQ(o.binding, std::vector<Limiter>{Limiter::shared_memory});
  EXPECT_EQ(compute(sm("sm_90"), {.threads_per_block = 128, .regs_per_thread = 40, .smem_per_block = 45 * 1024})
                .active_blocks,
            4);
}

TEST(Occupancy, VoltaRoundsSharedMemoryTo256BytesAndReservesNothing) {
  // 20000 -> 20224 (79 x 256); 98304 / 20224 = 4.86 -> 4 blocks of 4 warps = 25%.
  const Occupancy o = compute(sm("sm_70"), {.threads_per_block = 128, .regs_per_thread = 32, .smem_per_block = 20000});
  EXPECT_EQ(o.smem_per_block, 20224);
  EXPECT_EQ(o.active_blocks, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.25);
}

TEST(Occupancy, SmallBlocksHitTheBlockSlotLimit) {
  // 64 threads = 2 warps: the warp slots would allow 32 blocks and so do the block slots; 64 warps = 100%.
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 64, .regs_per_thread = 16, .smem_per_block = 0});
  EXPECT_EQ(o.active_blocks, 32);
  EXPECT_EQ(o.binding, (std::vector<Limiter>{Limiter::warps, Limiter::blocks}));
  // 32 threads = 1 warp: only 32 block slots, so 32 of 64 warps = 50%.
  const Occupancy one = compute(sm("sm_90"), {.threads_per_block = 32, .regs_per_thread = 16, .smem_per_block = 0});
  EXPECT_EQ(one.active_blocks, 32);
  EXPECT_DOUBLE_EQ(one.occupancy, 0.5);
  EXPECT_EQ(one.binding, std::vector<Limiter>{Limiter::blocks});
}

TEST(Occupancy, ArchitecturesDifferInWarpSlots) {
  // 1024 threads = 32 warps: Turing holds 32 warps (100%), Ampere consumer parts 48 (one block = 66.7%).
  EXPECT_DOUBLE_EQ(compute(sm("sm_75"), {.threads_per_block = 1024, .regs_per_thread = 32}).occupancy, 1.0);
  const Occupancy ga = compute(sm("sm_86"), {.threads_per_block = 1024, .regs_per_thread = 32});
  EXPECT_EQ(ga.active_blocks, 1);
  EXPECT_NEAR(ga.occupancy, 32.0 / 48.0, 1e-12);
}

TEST(Occupancy, PartialWarpsCountAsWholeWarps) {
  const Occupancy o = compute(sm("sm_90"), {.threads_per_block = 100, .regs_per_thread = 32});
  EXPECT_EQ(o.warps_per_block, 4);
  EXPECT_EQ(o.active_blocks, 16);
}

TEST(Occupancy, ImpossibleShapesAreUsageErrors) {
  const ArchLimits h = sm("sm_90");
  EXPECT_THROW(compute(h, {.threads_per_block = 0, .regs_per_thread = 32}), aisp::UsageError);
  EXPECT_THROW(compute(h, {.threads_per_block = 1025, .regs_per_thread = 32}), aisp::UsageError);
  EXPECT_THROW(compute(h, {.threads_per_block = 256, .regs_per_thread = 256}), aisp::UsageError);
  EXPECT_THROW(compute(h, {.threads_per_block = 256, .regs_per_thread = 32, .smem_per_block = 227 * 1024 + 1}),
               aisp::UsageError);
  EXPECT_THROW(compute(h, {.threads_per_block = 256, .regs_per_thread = 32, .smem_per_block = -1}), aisp::UsageError);
  // 1024 threads x 65 regs: 2304 per warp x 32 warps = 73728 > 65536 registers per block.
  EXPECT_THROW(compute(h, {.threads_per_block = 1024, .regs_per_thread = 65}), aisp::UsageError);
  // 64 regs fit exactly: 2048 x 32 = 65536.
  EXPECT_EQ(compute(h, {.threads_per_block = 1024, .regs_per_thread = 64}).active_blocks, 1);
}

TEST(Occupancy, ArchitectureNames) {
  for (const char* name : {"sm_90", "90", "9.0", "SM_90", "sm90"}) {
    const auto a = find_architecture(name);
    ASSERT_TRUE(a) << name;
    EXPECT_EQ(a->cc, 90) << name;
  }
  EXPECT_FALSE(find_architecture("sm_91"));
  EXPECT_FALSE(find_architecture("hopper"));
  EXPECT_FALSE(find_architecture(""));
  EXPECT_EQ(architecture_for_cc(80)->smem_per_sm, 164 * 1024);
  for (const auto& a : known_architectures()) {
    EXPECT_GT(a.max_warps_per_sm, 0) << a.name;
    EXPECT_GT(a.smem_alloc_unit, 0) << a.name;
  }
}

}  // namespace
