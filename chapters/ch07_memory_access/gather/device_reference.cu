// ch07:gather — the trusted device reference: one thread per output element, read straight from the
// table. Obviously correct, not fast; the host reference (reference.hpp) checks it at test sizes.
#include "chapters/ch07_memory_access/gather/problem.hpp"

namespace aisp::ch07::gather {

__global__ void gather_reference_kernel(const __nv_bfloat16* table, const std::int32_t* idx,
                                        __nv_bfloat16* ref, std::int64_t dim, std::int64_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < static_cast<std::size_t>(total); e += stride) {
    const std::size_t l = e / dim;
    const std::size_t c = e % dim;
    ref[e] = table[static_cast<std::size_t>(idx[l]) * dim + c];
  }
}

void gather_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream) {
  gather_reference_kernel<<<full_wave_blocks(a, 256), 256, 0, stream>>>(a.table, a.indices, ref, a.dim,
                                                                         a.lookups * a.dim);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch07::gather
