// What the CUDA runtime knows about a compiled kernel, as facts a variant reports beside its time
// (VariantBase::facts): registers, spills, shared memory and the occupancy the runtime predicts.
#pragma once

#include <cstddef>
#include <vector>

#include "device/ladder.hpp"

namespace aisp {

struct KernelFacts {
  int regs_per_thread = 0;
  std::size_t local_bytes_per_thread = 0;  // local memory: register spills and local arrays
  std::size_t static_smem_bytes = 0;
  int max_threads_per_block = 0;           // the compiled limit (__launch_bounds__ lowers it)
  int active_blocks_per_sm = 0;            // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  double occupancy = 0;                    // active warps / the SM's maximum warps, 0..1
};

// `kernel` is the address of a __global__ function; `block_threads` and `dynamic_smem` are how the
// variant launches it. Uses the current device.
KernelFacts kernel_facts(const void* kernel, int block_threads, std::size_t dynamic_smem = 0);

// regs, local_bytes (spills), smem_bytes, blocks_per_sm, occupancy_pct: the standard facts.
std::vector<Fact> standard_facts(const KernelFacts& k);

}  // namespace aisp
