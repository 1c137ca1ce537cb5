// ch14:jit_specialize:01_generic — the permute kernel compiled once, by nvcc, for every shape.
//
// What it is: permute_kernel.cuh with its dims, strides and count as kernel arguments, the way a library
// ships a permute that must serve any tensor: one output element per thread (coalesced writes; reads
// coalesced along head_dim, the dim the head split keeps contiguous), 256-thread blocks.
// Why it is not at the bound: each thread turns its flat index into four coordinates with three 32-bit
// divisions (and the remainders) by run-time divisors. The GPU has no integer divide; nvcc emits a float
// reciprocal (I2F, MUFU.RCP, F2I: quarter-rate pipes on Hopper) plus multiplies and two correction
// steps, ~20 instructions per division, ~70 per element with the address arithmetic, for 4 bytes moved.
// Napkin math (H100 SXM, 132 SMs at ~1.75 GHz): 9 quarter-rate ops per element at 16 per clock per SM
// allow ~4.1e11 elements/s, while DRAM (~3.35 TB/s) could take 8.4e11 elements/s at 4 bytes each: expect
// about half the DRAM copy bandwidth, bound by the index arithmetic, not by memory.
// Run: aisp bench run --targets ch14:jit_specialize:01_generic
#include "chapters/ch14_compilers/jit_specialize/permute_kernel.cuh"
#include "chapters/ch14_compilers/jit_specialize/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch14::jit_specialize::v01 {

void launch(const Args& a, cudaStream_t stream) {
  const PermuteShape& p = a.shape;
  ch14_permute4_kernel<<<blocks_for(p), k_threads, 0, stream>>>(a.in, a.out, p.count, p.dim[1], p.dim[2], p.dim[3],
                                                                p.in_stride[0], p.in_stride[1], p.in_stride[2],
                                                                p.in_stride[3]);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(ch14_permute4_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(JitSpecializeProblem, launch, facts, .step = 1, .slug = "generic",
                                 .kind = VariantKind::baseline,
                                 .summary = "nvcc-compiled permute, dims and strides as kernel arguments");

}  // namespace aisp::ch14::jit_specialize::v01
