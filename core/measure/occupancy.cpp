#include "core/measure/occupancy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "core/base/error.hpp"

namespace aisp::occupancy {

namespace {

constexpr std::int64_t k_kib = 1024;

ArchLimits arch(std::string name, int cc, int max_warps, int max_blocks, std::int64_t smem_sm_kib,
                std::int64_t smem_block_kib, int smem_unit, int reserved) {
  ArchLimits a;
  a.name = std::move(name);
  a.cc = cc;
  a.max_warps_per_sm = max_warps;
  a.max_blocks_per_sm = max_blocks;
  a.smem_per_sm = smem_sm_kib * k_kib;
  a.smem_per_block_optin = smem_block_kib * k_kib;
  a.smem_alloc_unit = smem_unit;
  a.smem_reserved_per_block = reserved;
  return a;
}

int round_up(int x, int unit) { return (x + unit - 1) / unit * unit; }
std::int64_t round_up(std::int64_t x, std::int64_t unit) { return (x + unit - 1) / unit * unit; }

}  // namespace

const std::vector<ArchLimits>& known_architectures() {
  // name, cc, max warps/SM, max blocks/SM, smem/SM KiB, smem/block opt-in KiB, smem unit, reserved/block.
  // Volta and Turing allocate shared memory in 256-byte units and reserve nothing per block; from Ampere on
  // the unit is 128 bytes and the driver reserves 1 KiB per block (cudaDevAttrReservedSharedMemoryPerBlock).
  static const std::vector<ArchLimits> table = {
      arch("sm_70", 70, 64, 32, 96, 96, 256, 0),    // V100
      arch("sm_75", 75, 32, 16, 64, 64, 256, 0),    // T4, RTX 20xx
      arch("sm_80", 80, 64, 32, 164, 163, 128, 1024),  // A100
      arch("sm_86", 86, 48, 16, 100, 99, 128, 1024),   // RTX 30xx, A40
      arch("sm_89", 89, 48, 24, 100, 99, 128, 1024),   // L4, L40, RTX 40xx
      arch("sm_90", 90, 64, 32, 228, 227, 128, 1024),  // H100, H200
      arch("sm_100", 100, 64, 32, 228, 227, 128, 1024),  // B200
  };
  return table;
}

std::optional<ArchLimits> architecture_for_cc(int cc) {
  for (const auto& a : known_architectures()) {
    if (a.cc == cc) return a;
  }
  return std::nullopt;
}

std::optional<ArchLimits> find_architecture(std::string_view name) {
  std::string s;
  for (char c : name) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("sm_", 0) == 0) {
    s = s.substr(3);
  } else if (s.rfind("sm", 0) == 0) {
    s = s.substr(2);
  }
  if (const auto dot = s.find('.'); dot != std::string::npos) s.erase(dot, 1);  // "9.0" -> "90"
  if (s.empty() || s.size() > 3 || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  return architecture_for_cc(std::stoi(s));
}

std::string_view to_string(Limiter l) {
  switch (l) {
    case Limiter::warps: return "warps";
    case Limiter::blocks: return "blocks";
    case Limiter::registers: return "registers";
    case Limiter::shared_memory: return "shared memory";
  }
  return "?";
}

Occupancy compute(const ArchLimits& a, const KernelShape& k) {
  if (k.threads_per_block < 1 || k.threads_per_block > a.max_threads_per_block) {
    throw UsageError(fmt::format("threads per block must be 1..{} on {}, not {}", a.max_threads_per_block,
                                 a.name, k.threads_per_block));
  }
  if (k.regs_per_thread < 0 || k.regs_per_thread > a.max_regs_per_thread) {
    throw UsageError(fmt::format("registers per thread must be 0..{} on {}, not {}", a.max_regs_per_thread,
                                 a.name, k.regs_per_thread));
  }
  if (k.smem_per_block < 0 || k.smem_per_block > a.smem_per_block_optin) {
    throw UsageError(fmt::format("shared memory per block must be 0..{} bytes on {}, not {}",
                                 a.smem_per_block_optin, a.name, k.smem_per_block));
  }
  Occupancy o;
  o.warps_per_block = (k.threads_per_block + a.warp_size - 1) / a.warp_size;

  // Warp slots and block slots: plain division.
  o.blocks_by_warps = a.max_warps_per_sm / o.warps_per_block;
  o.blocks_by_block_slots = a.max_blocks_per_sm;

  // Registers go to whole warps in units of reg_alloc_unit, and each warp lives on one of the SM's
  // sub-partitions, whose quarter of the register file it must fit in: so count warps per sub-partition.
  o.regs_per_warp = round_up(k.regs_per_thread * a.warp_size, a.reg_alloc_unit);
  if (o.regs_per_warp == 0) {
    o.blocks_by_registers = a.max_blocks_per_sm;
  } else {
    // The launch check assumes a block's warps are spread evenly over the sub-partitions.
    const int regs_checked = o.regs_per_warp * round_up(o.warps_per_block, a.sub_partitions);
    if (regs_checked > a.regs_per_block) {
      throw UsageError(fmt::format("{} threads x {} registers do not fit one block's {} registers on {} "
                                   "(the launch would fail: too many resources requested)",
                                   k.threads_per_block, k.regs_per_thread, a.regs_per_block, a.name));
    }
    const int warps_per_partition = (a.regs_per_sm / a.sub_partitions) / o.regs_per_warp;
    o.blocks_by_registers = warps_per_partition * a.sub_partitions / o.warps_per_block;
  }

  // Shared memory: the driver's reserved part is added per block, then rounded to the allocation unit.
  o.smem_per_block = round_up(k.smem_per_block + a.smem_reserved_per_block,
                              static_cast<std::int64_t>(a.smem_alloc_unit));
  o.blocks_by_smem = o.smem_per_block == 0 ? a.max_blocks_per_sm
                                           : static_cast<int>(a.smem_per_sm / o.smem_per_block);

  o.active_blocks = std::min({o.blocks_by_warps, o.blocks_by_block_slots, o.blocks_by_registers, o.blocks_by_smem});
  o.active_warps = o.active_blocks * o.warps_per_block;
  o.occupancy = static_cast<double>(o.active_warps) / a.max_warps_per_sm;
  if (o.blocks_by_warps == o.active_blocks) o.binding.push_back(Limiter::warps);
  if (o.blocks_by_block_slots == o.active_blocks) o.binding.push_back(Limiter::blocks);
  // A resource the kernel does not use binds nothing, even where its stand-in value ties.
  if (o.regs_per_warp > 0 && o.blocks_by_registers == o.active_blocks) o.binding.push_back(Limiter::registers);
  if (o.smem_per_block > 0 && o.blocks_by_smem == o.active_blocks) o.binding.push_back(Limiter::shared_memory);
  return o;
}

}  // namespace aisp::occupancy
