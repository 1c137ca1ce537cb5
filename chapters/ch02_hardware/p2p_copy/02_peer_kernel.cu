// ch02:p2p_copy:02_peer_kernel — this GPU's SMs read the peer's memory directly (peer access).
//
// What changed: no host buffer. With peer access enabled (the problem enables it, CUDA C++ Programming
// Guide, "Peer-to-Peer Memory Access"), a kernel on this GPU dereferences the peer's pointer; loads travel
// over NVLink (or PCIe P2P) and the stores stay local. The kernel is ch07:copy's 04_in_flight.
// Why it helps: each byte crosses one link once instead of PCIe twice, and NVLink is several times PCIe.
// Little's law again: the link's latency is longer than DRAM's, so the four independent 16-byte loads in
// flight per thread matter even more here.
// Napkin math: 1 GiB at the measured GPU<->GPU ceiling (~350-400 GB/s per direction on H100/H200
// NVLink 4) = ~3 ms; expect ~100% of the p2p ceiling, which is the faster of the driver's copy and this
// kernel (aisp hw peaks).
// Run: aisp bench run --targets ch02:p2p_copy:02_peer_kernel
#include "chapters/ch02_hardware/p2p_copy/problem.hpp"

namespace aisp::ch02::p2p_copy::v02 {

constexpr int k_unroll = 4;

__global__ void peer_read_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* src4 = reinterpret_cast<const float4*>(src);
  auto* dst4 = reinterpret_cast<float4*>(dst);
  std::size_t i = first;
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 v[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) v[k] = src4[i + k * stride];  // remote loads, over the link
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) dst4[i + k * stride] = v[k];  // local stores
  }
  for (; i < n4; i += stride) dst4[i] = src4[i];
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) dst[j] = src[j];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  peer_read_copy_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(P2pCopyProblem, launch, .step = 2, .slug = "peer_kernel", .kind = VariantKind::optimized,
                      .summary = "a copy kernel on this GPU reading the peer's memory over the link",
                      .features = {"multi_gpu"});

}  // namespace aisp::ch02::p2p_copy::v02
