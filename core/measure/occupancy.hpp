// The occupancy formula (docs/occupancy.md): how many blocks of a kernel fit on one SM at once, from the
// kernel's block size, registers per thread and shared memory per block and the SM's per-architecture
// limits. Pure C++: `aisp tools occupancy` uses it with no GPU, and a GPU test checks it against
// cudaOccupancyMaxActiveBlocksPerMultiprocessor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aisp::occupancy {

// One architecture's per-SM limits (CUDA C++ Programming Guide, "Compute Capabilities", table of technical
// specifications; allocation granularities as in the CUDA occupancy calculator, docs/occupancy.md).
struct ArchLimits {
  std::string name;                   // "sm_90"
  int cc = 0;                         // 90
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int max_warps_per_sm = 0;
  int max_blocks_per_sm = 0;
  int regs_per_sm = 65536;            // 32-bit registers
  int regs_per_block = 65536;
  int max_regs_per_thread = 255;
  int reg_alloc_unit = 256;           // registers are given to a warp in units of this many
  int sub_partitions = 4;             // schedulers per SM; the register file is split among them
  std::int64_t smem_per_sm = 0;       // bytes, the largest shared-memory carve-out of the unified L1
  std::int64_t smem_per_block_optin = 0;  // bytes a block may use after cudaFuncSetAttribute opt-in
  std::int64_t smem_per_block_default = 48 * 1024;  // without the opt-in
  int smem_alloc_unit = 0;            // bytes
  int smem_reserved_per_block = 0;    // bytes the driver keeps per block (1 KiB from sm_80 on)
};

// The architectures the table knows, oldest first.
const std::vector<ArchLimits>& known_architectures();

// "sm_90", "90", "9.0", "sm90" all name compute capability 9.0; nullopt when the table lacks it.
std::optional<ArchLimits> find_architecture(std::string_view name);

// The table's entry for a compute capability (major*10+minor), or nullopt.
std::optional<ArchLimits> architecture_for_cc(int cc);

struct KernelShape {
  int threads_per_block = 0;
  int regs_per_thread = 0;
  std::int64_t smem_per_block = 0;  // static + dynamic bytes, without the driver's reserved part
};

enum class Limiter { warps, blocks, registers, shared_memory };
std::string_view to_string(Limiter l);

struct Occupancy {
  int warps_per_block = 0;
  int regs_per_warp = 0;            // allocated: rounded up to the allocation unit
  std::int64_t smem_per_block = 0;  // allocated: with the reserved part, rounded up to the unit
  int blocks_by_warps = 0;          // blocks per SM each limit alone allows
  int blocks_by_block_slots = 0;
  int blocks_by_registers = 0;      // max_blocks_per_sm when the kernel uses no registers
  int blocks_by_smem = 0;           // max_blocks_per_sm when it uses (and reserves) no shared memory
  int active_blocks = 0;            // the minimum of the four
  int active_warps = 0;
  double occupancy = 0;             // active warps / max warps per SM, 0..1
  std::vector<Limiter> binding;     // every limit equal to active_blocks (a tie lists several)
};

// Throws UsageError for a shape that cannot launch: threads outside 1..max_threads_per_block, registers
// outside 0..max_regs_per_thread, shared memory negative or over the opt-in per-block maximum, or a block
// whose registers exceed the per-block register file.
Occupancy compute(const ArchLimits& arch, const KernelShape& k);

}  // namespace aisp::occupancy
